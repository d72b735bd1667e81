"""Base pieces of every request handler of the ti service (REST API, pages, job endpoints): refusals and errors
answered alike, and who the caller is."""
