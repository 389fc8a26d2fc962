"""The operator dashboard's pages, partials and actions, one module per part of the dashboard:
`sessions` (the list), `session` (the session page), `memory` (notepad, scratchpad,
observations), `records` (archives, prompt inspector). `urls.py` names each view.

Pages render whole templates; htmx requests get a partial of the same template
(`"page.html#part"`). Every action goes through a service; every read through a selector.
Live changes arrive over the dashboard websocket (`consumers.py`); an action's response also
carries what it changed, so a page without its websocket stays right.
"""
