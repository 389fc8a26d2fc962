"""The operator dashboard: server-rendered pages (Django templates, htmx), live over a websocket.

- `selectors/`: every read the pages need (the session list, transcript pages, the context
  gauge, the prompt inspector, archives, the memory panels), composed from the apps' selectors;
- `transcript.py`: stored messages and live events as the same transcript items;
- `views/` + `forms.py`: pages, partials and the operator's actions (through services only);
- `consumers.py`: the dashboard websockets, which push rendered fragments (`fragments.py`);
- `markdown.py`: markdown to sanitized HTML, the only way untrusted text becomes markup.
"""
