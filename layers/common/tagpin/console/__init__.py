"""The console's HTTP front: its routes on the HTTP API (``GET /console...``, ``POST
/console/actions/<name>``), who may see them, and the answers, composed from the console use case
(``tagpin.usecases.console``) and the web adapter (``tagpin.adapters.web``). ``tagpin.wiring``
builds it; the console function's handler calls it."""
