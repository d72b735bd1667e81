"""Operations: validation + storage + rules, one module per resource.

Each function takes an open SQLAlchemy session (inside a transaction), the Actor and plain data, and
returns JSON-ready dicts. They run in a worker thread, never on the event loop.
"""
