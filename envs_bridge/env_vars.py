"""Environment variables the env server reads (set by the pool; shared without importing the server)."""

# The server exits when this process id is gone, so a killed trainer leaves no servers behind.
PARENT_PID = "MILEGPO_ENV_SERVER_PARENT_PID"
# "1" enables POST /debug/stall, which makes the next reset/step hang (fault tests only; off by default).
DEBUG = "MILEGPO_ENV_SERVER_DEBUG"
# The pool's temporary log folder for this server: removed by the server if it outlives its parent.
LOG_DIR = "MILEGPO_ENV_SERVER_LOG_DIR"
