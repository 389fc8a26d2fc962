"""The operator dashboard's pages, partials and actions, one module per part of the dashboard:
`sessions` (the list), `session` (the session page), `subsessions` (a root's tree), `records`
(archives, prompt inspector), `agents` (the Agents section), and `memory_history`, the history
pages a feature's views answer with. `urls.py` names each view; each feature's own views are in its package
(`FeatureDashboard.urls`).

Pages render whole templates; htmx requests get a partial of the same template
(`"page.html#part"`). Every action goes through a service; every read through a selector.
Live changes arrive over the dashboard websocket (`consumers.py`); an action's response also
carries what it changed, so a page without its websocket stays right.
"""
