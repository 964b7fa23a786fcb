"""The console's web side, below the routes (``tagpin.console``): who is signed in (``auth``: the JWT
authorizer's claims on AWS, an HMAC-signed session cookie locally; CSRF tokens), and the HTML
(``render``: Jinja2 with autoescape on, so every string from a registry, a cluster or a
notification is text, never markup; static CSS and JS under hashed names)."""
