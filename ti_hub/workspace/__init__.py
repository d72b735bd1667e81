"""What runs inside a workspace, beside the user's Jupyter server: the VS Code launcher (``vscode.py``)."""
