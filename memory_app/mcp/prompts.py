"""Every text the model reads about MCP tools, in one place."""

from __future__ import annotations

# A tool the server lists without a description.
NO_DESCRIPTION = "The tool {tool} of the MCP server {server}."
# Parts of a result the model is not given as they are.
IMAGE_NOT_SHOWN = "[an image ({mime}, {size} characters of base64) the server returned, not shown]"
BLOB_NOT_SHOWN = (
    "[a binary resource {uri} ({mime}, {size} characters of base64) the server returned, not shown]"
)
RESOURCE_LINK = "[a resource link: {uri} ({name})]"
CONTENT_NOT_SHOWN = "[content of type {kind} the server returned, not shown]"
EMPTY_RESULT = "(the tool returned nothing)"
ERROR_WITHOUT_TEXT = "The tool reported an error without saying what it was."
# A call that could not be answered: nothing the server said is quoted (it may hold secrets).
SERVER_FAILED = (
    "The MCP server {server} failed during this call ({reason}) and is being restarted; the call may "
    "or may not have taken effect. Try again in a moment, or do without this tool."
)
SERVER_UNAVAILABLE = (
    "The MCP server {server} is not running ({reason}); it is being restarted. Try again later, or "
    "do without its tools."
)
SERVER_REFUSED = "The MCP server {server} refused the call: {message}"
REASON_CRASHED = "it stopped answering"
REASON_TIMEOUT = "no answer within {seconds:g} seconds"
REASON_START = "it could not be started"
REASON_STOPPED = "it was stopped"
