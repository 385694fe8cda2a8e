# The host's own python, checked before root runs it (system_python_command: `sh -c TEXT fleet-interpreter PYTHON
# ARGS...`): owner.py's rule runs on it, so nothing of a user's may run first. pycheck.sh looks at the path, each
# link and every folder above them; then PYTHON ARGS... runs in this process; else one line on stderr, exit 77,
# nothing run. A path that leads nowhere: exit 127, as the shell says.
#@include pycheck.sh
python_checked "$1" || exit
exec "$@"
