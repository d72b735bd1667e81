"""What the JupyterHub process loads: its config (config.py), logins (auth.py, oauth.py, oauth_pages.py), its SQLite
tuning (sqlite.py), the home page's alert banner (alerts.py), and the embedded platform's hub entry point (main.py).
Nothing here runs in the ti service, the SSH gateway or a workspace."""
