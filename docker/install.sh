#!/bin/sh
# The production image's install steps, and nothing else: docker/Dockerfile runs them,
# and CI runs the very same file into a plain venv (tests/operations/test_image.py), so
# the image installs what the tests ran on (docs/operating.md, "Building the image").
#
#   install.sh dependencies LOCK      every pin of the production lock (requirements/base.txt),
#                                     nothing resolved afresh, nothing else
#   install.sh project SOURCE HOME    the project from SOURCE as a package (not editable)
#                                     and, into HOME, the files that are not Python:
#                                     manage.py, templates/, static/ (DURABLE_RUNS_HOME)
#
# PYTHON names the interpreter (default: python, the image's).
set -eu
python=${PYTHON:-python}

case "${1:-}" in
dependencies)
    # --no-deps: the lock is complete (uv pip compile wrote every transitive pin), so pip
    # installs exactly these versions and resolves nothing; `pip check` then proves that
    # they fit together.
    "$python" -m pip install --no-deps --requirement "$2"
    "$python" -m pip check
    ;;
project)
    # Not editable: the image runs the installed package in site-packages, not a source
    # tree, and --no-deps adds nothing the lock did not already install.
    "$python" -m pip install --no-deps "$2"
    mkdir -p "$3"
    cp -R "$2/manage.py" "$2/templates" "$2/static" "$3/"
    "$python" -m pip check
    ;;
*)
    echo "usage: install.sh dependencies LOCK | project SOURCE HOME" >&2
    exit 2
    ;;
esac
