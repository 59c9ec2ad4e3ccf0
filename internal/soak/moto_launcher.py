"""Serve moto's server app with DynamoDB requests one at a time (see backend.go).

Usage: moto_launcher.py HOST PORT
"""
import signal
import sys
import threading

from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()


def serial(environ, start_response):
    if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
        return app(environ, start_response)
    with lock:
        return list(app(environ, start_response))


signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
run_simple(sys.argv[1], int(sys.argv[2]), serial, threaded=True)
