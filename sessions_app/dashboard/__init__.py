"""The operator dashboard: server-rendered pages (Django templates, htmx), live over a websocket.

- `selectors/`: every read the pages need (the session list, transcript pages, the context
  gauge, the prompt inspector, archives, memory histories), composed from the apps' selectors;
- `transcript.py`: stored messages and live events as the same transcript items;
- `views/` + `forms.py`: pages, partials and the operator's actions (through services only);
- `panels.py`: what the features show (`FeatureDashboard`): their panels of the session page,
  its tabs, their archive sections and memory histories. The dashboard names no feature, and
  imports none: each feature's own dashboard code (views, forms, templates, URLs) is in its
  package, a floor above this one, and may use the helpers here;
- `consumers.py`: the dashboard websockets, which push rendered fragments (`fragments.py`);
- `markdown.py`: markdown to sanitized HTML, the only way untrusted text becomes markup.
"""
