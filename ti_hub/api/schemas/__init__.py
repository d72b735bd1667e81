"""JSON Schemas of the API's requests and answers, one module per resource (see api/contract.py)."""
