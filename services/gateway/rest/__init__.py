"""The gateway's REST front end: FastAPI routers that parse a request, call ops/, and answer."""
