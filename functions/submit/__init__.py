"""The submit function (task-file uploads, schedule firings) and the HTTPS API."""
