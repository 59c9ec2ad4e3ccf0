"""Run moto's server app with one request at a time.

moto_server's werkzeug server is threaded and moto evaluates a DynamoDB
condition and applies the write without a lock, so two concurrent
conditional puts can both succeed — which real DynamoDB never allows for one
item. This launcher serves moto's own handlers (DynamoDB and SQS directly,
the rest through the WSGI app moto_server builds) with DynamoDB requests
behind a global lock, keeping moto's validation fidelity and giving the
per-item atomicity the ledger relies on.
Only DynamoDB is serialised: an SQS long poll (ReceiveMessage with
WaitTimeSeconds) waits inside its request and must not stall other calls.
Usage: moto_serial.py HOST PORT [PORT_FILE] (PORT 0 for a free one, written
to PORT_FILE as "PORT\n"), or moto_serial.py --zygote SOCKET_PATH (see
zygote: servers forked on request, moto already imported).
"""
import collections
import contextlib
import copy
import ctypes
import functools
import itertools
import json
import logging
import os
import random
import select
import signal
import socket
import struct
import sys
import threading
import traceback

from botocore.awsrequest import AWSPreparedRequest, HeadersDict
from botocore.exceptions import ClientError
from werkzeug.serving import WSGIRequestHandler, make_server
from moto import backends
from moto.core import responses, utils
from moto.moto_api._internal import mock_random
from moto.dynamodb import responses as dynamodb_responses
from moto.dynamodb.responses import DynamoHandler
from moto.sqs.responses import SQSResponse
from moto.utilities import aws_headers
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import table as dynamodb_table
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.parsing import ast_nodes
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

# Two lookups moto makes on every request, computed once: the list of its
# own modules (a directory listing and a stat per entry, to match the Host
# header) and a response class's method names (inspect.getmembers). Both
# depend only on the installed moto; together they were about a tenth of
# moto's time per request.
_modules = list(backends.list_of_moto_modules())
backends.list_of_moto_modules = lambda: _modules
responses.method_names_from_class = functools.lru_cache(maxsize=None)(utils.method_names_from_class)


# A DynamoDB result that is already its JSON wire form (strings, numbers,
# booleans, lists and maps: no bytes, timestamps or nulls, which need the
# output shape) is sent as it is. moto's generic serializer walks the
# botocore output shape for every value only to produce the same JSON; it
# was 32 of 112 profiled seconds of moto's CPU over the worker tests.
# Conditions, updates and errors are still moto's own. A result with a key
# its output shape does not have (DeleteItem's ConsumedCapacityUnits,
# which the serializer leaves out) takes moto's serializer.
def _wire(v):
    t = type(v)
    if t is str or t is int or t is bool or t is float:
        return True
    if t is dict:
        return all(type(k) is str and _wire(x) for k, x in v.items())
    if t is list:
        return all(_wire(x) for x in v)
    return False


_execute = dynamodb_responses.DynamoResult.execute_result


def _execute_wire(self, context):
    r = self.result
    shape = context.operation_model.output_shape
    if (context.service_model.protocol == "json" and type(r) is dict and shape is not None
            and r.keys() <= shape.members.keys() and _wire(r)):
        version = context.service_model.metadata.get("jsonVersion", "1.0")
        return 200, {"Content-Type": "application/x-amz-json-" + version}, json.dumps(r)
    return _execute(self, context)


dynamodb_responses.DynamoResult.execute_result = _execute_wire


# A Query reads the table through all_items(), which sorts every item of
# the table by its key (Python comparisons of moto's typed values, most of
# a millisecond per hundred items) before matching the hash key; the
# matches are then sorted again by the whole key of the table or the index,
# which orders them whatever order they came in. Inside a Query the first
# sort is skipped: with a few hundred tasks in the table, the reconciler's
# by_state queries (160 per run at 16 shards) kept moto busy by themselves
# and a 400-task soak on moto stalled. Scan keeps the sorted order its
# pagination walks.
_in_query = threading.local()
_all_items = dynamodb_table.Table.all_items


def _all_items_for(self):
    if not getattr(_in_query, "on", False):
        return _all_items(self)
    if self.range_key_attr:
        return [item for hash_set in self.items.values() for item in hash_set.values()]
    return list(self.items.values())


_query = dynamodb_table.Table.query


def _query_unsorted(self, *args, **kwargs):
    _in_query.on = True
    try:
        return _query(self, *args, **kwargs)
    finally:
        _in_query.on = False


dynamodb_table.Table.all_items = _all_items_for
dynamodb_table.Table.query = _query_unsorted

# moto names every response with a fresh 52-character request id, drawn
# one random character at a time, twice per request (a tenth of a
# millisecond each); a counter names them as uniquely.
_ids = itertools.count(1)


def _request_id(headerdict=None):
    rid = "%052d" % next(_ids)
    if isinstance(headerdict, dict):
        headerdict["x-amzn-requestid"] = rid
    return rid


aws_headers.gen_amzn_requestid_long = _request_id
responses.gen_amzn_requestid_long = _request_id

# werkzeug writes a line per request ("POST / 200") to the log: a quarter
# of a millisecond each, and nothing a failing test could use.
logging.getLogger("werkzeug").setLevel(logging.WARNING)

# moto parses an UpdateExpression twice per UpdateItem (to list the names
# and values it uses, then to apply it) and walks the tree it parsed about
# ten times to validate and resolve it; those walks asked an abstract base
# class isinstance() of every node, most of moto's time per update. Below:
# a parse is kept per expression string (the validator applies a deep copy,
# never the tree it is given), a node type's subclass test is asked once,
# and a ConditionExpression's tokens are kept per string (a token is an
# immutable tuple; parsing builds new nodes from them). The walks, the
# validators and the conditions are still moto's. Replaying the DynamoDB
# requests of the worker, ledger, API, reconciler and model tests (15,778)
# gave byte-identical responses, with 31-43% less of moto's CPU; an
# UpdateItem of a task went from 8.7-9.4 to 3.8-5.4 ms.
_parse_update = UpdateExpressionParser.make.__func__


@functools.lru_cache(maxsize=1024)
def _parse_update_once(cls, expression):
    return _parse_update(cls, expression)


UpdateExpressionParser.make = classmethod(_parse_update_once)

_subclass = {}


def _is(t, cls):
    k = (t, cls)
    r = _subclass.get(k)
    if r is None:
        r = _subclass[k] = issubclass(t, cls)
    return r


_node_types = ast_nodes.DepthFirstTraverser.nodes_to_be_processed


def _node_types_once(self):
    t = self.__dict__.get("_node_types")
    if t is None:
        t = self.__dict__["_node_types"] = _node_types(self)
    return t


def _process(self, node):
    t = type(node)
    for class_key, processor in self._processing_map().items():
        if _is(t, class_key):
            return processor(node)


def _traverse(self, node, child_id=-1):
    # moto's DepthFirstTraverser.traverse_node_recursively, with _is.
    t = type(node)
    if _is(t, ast_nodes.Node):
        parent_node = node.parent
        if node.children is not None:
            for i, child_node in enumerate(node.children):
                self.pre_processing_of_child(node, i)
                self.traverse_node_recursively(child_node, i)
        if _is(t, self.nodes_to_be_processed()):
            node = self.process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
    return node


def _find_clauses(self, clause_types):
    # moto's Node.find_clauses, with _is.
    clauses = []
    for child in self.children or []:
        t = type(child)
        if t in clause_types:
            clauses.append(child)
        elif _is(t, ast_nodes.Expression) or _is(t, ast_nodes.UpdateExpressionFunction):
            clauses.extend(child.find_clauses(clause_types))
    return clauses


ast_nodes.DepthFirstTraverser.nodes_to_be_processed = _node_types_once
ast_nodes.DepthFirstTraverser.process = _process
ast_nodes.DepthFirstTraverser.traverse_node_recursively = _traverse
ast_nodes.Node.find_clauses = _find_clauses

_lex_condition = ConditionExpressionParser._lex_condition_expression
_condition_tokens = {}


def _lex_condition_once(self):
    e = self.condition_expression
    tokens = _condition_tokens.get(e)
    if tokens is None:
        tokens = tuple(_lex_condition(self))
        if len(_condition_tokens) < 1024:
            _condition_tokens[e] = tokens
    return collections.deque(tokens)


ConditionExpressionParser._lex_condition_expression = _lex_condition_once

# TransactWriteItems first deep-copies every table it writes, whole, to
# restore it if the transaction is cancelled: most of a transaction's cost
# once a soak's tables hold a few hundred tasks. Inside a transaction the
# copy is only of what the transaction can change: the table's item index
# (new dicts holding the same items) with a deep copy of each item the
# transaction names. A cancelled transaction restores that copy as moto
# restores its own, and then gives every value of the restored table a
# list or dict of its own (_as_copied): moto's restored table is a deep
# copy of every item, and a copy parts what moto can leave shared (two
# attributes holding one set after SET a = :s, b = :s), so a later ADD to
# one of them changes only it. A transaction naming a table with a stream
# (whose records a cancelled transaction also takes back) or a key that
# cannot be read or looked up (moto cancels it, naming the error) is all
# moto's. Requests are serialised (lock), so the class attribute set for
# the call is seen by this transaction only.
_transact_write = dynamodb_models.DynamoDBBackend.transact_write_items


def _own_containers(v, seen, memo):
    # In place, what DynamoType.__deepcopy__ gives a copy of v: a list (a
    # set's or a list's) or a map's dict of its own, members that are not
    # typed values copied, and a value reached twice copied once (seen).
    if id(v) in seen:
        return
    seen.add(id(v))
    if v.type == "L":
        v.value = [x if isinstance(x, dynamodb_models.DynamoType) else copy.deepcopy(x, memo) for x in v.value]
        for x in v.value:
            if isinstance(x, dynamodb_models.DynamoType):
                _own_containers(x, seen, memo)
    elif v.type == "M":
        v.value = {k: x if isinstance(x, dynamodb_models.DynamoType) else copy.deepcopy(x, memo)
                   for k, x in v.value.items()}
        for x in v.value.values():
            if isinstance(x, dynamodb_models.DynamoType):
                _own_containers(x, seen, memo)
    elif v.is_set():
        v.value = list(v.value)


def _as_copied(table):
    # The restored table's items are the ones it held before the
    # transaction (the ones it named, deep copies of them), no longer in
    # any other table: made in place what moto's deep copy of the table
    # would be, without copying every value.
    seen, memo = set(), {}
    for v in table.items.values():
        for item in (v.values() if table.range_key_attr else (v,)):
            for x in item.attrs.values():
                _own_containers(x, seen, memo)


def _item_key(table, op):
    attrs = op.get("Key") or op.get("Item") or {}
    h = dynamodb_models.DynamoType(attrs[table.hash_key_attr])
    r = dynamodb_models.DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
    return h, r


def _transact_write_copying_less(self, transact_items):
    keys = {}
    try:
        for item in transact_items:
            _, op = next(iter(item.items()))
            table = self.tables.get(op.get("TableName"))
            if table is not None:
                key = _item_key(table, op)
                hash(key)
                keys.setdefault(table.name, []).append(key)
    except Exception:
        return _transact_write(self, transact_items)
    if any(self.tables[name].stream_shard is not None for name in keys):
        return _transact_write(self, transact_items)
    snapshots = []

    def copy_touched(table, memo):
        snapshot = copy.copy(table)
        items = collections.defaultdict(dict)
        for h, v in table.items.items():
            items[h] = dict(v) if table.range_key_attr else v
        for h, r in keys[table.name]:
            if r is None and h in table.items:
                items[h] = copy.deepcopy(table.items[h])
            elif r is not None and r in table.items.get(h, {}):
                items[h][r] = copy.deepcopy(table.items[h][r])
        snapshot.items = items
        snapshots.append(snapshot)
        return snapshot

    dynamodb_table.Table.__deepcopy__ = copy_touched
    try:
        return _transact_write(self, transact_items)
    finally:
        del dynamodb_table.Table.__deepcopy__
        for table in self.tables.values():
            if any(table is s for s in snapshots):
                _as_copied(table)


dynamodb_models.DynamoDBBackend.transact_write_items = _transact_write_copying_less

# A DynamoDB or SQS request (JSON protocol: its X-Amz-Target names the
# operation) goes straight to moto's handler of that service, the entry
# moto's own in-process mock uses, instead of through the Flask app, whose
# routing, request objects and CORS headers were a fifth of moto's CPU per
# DynamoDB call; and its connection stays open for the next request
# (werkzeug's WSGI path closes every connection, so each request cost the
# client a new connection and the server a new thread). Responses are
# moto's own: status, headers and body. Every other request (S3, SES, SNS,
# EventBridge, moto's API) takes werkzeug's WSGI path to the whole moto
# app, as moto_server serves it.
class Handler(WSGIRequestHandler):
    def run_wsgi(self):
        target = self.headers.get("X-Amz-Target", "")
        service = next((v for k, v in _direct.items() if target.startswith(k)), None)
        if service is None or "Content-Length" not in self.headers:
            return super().run_wsgi()
        response_class, service_lock = service
        # Case-insensitive, as moto's own mock passes them (moto reads some
        # names in lower case: x-moto-account-id).
        headers = HeadersDict(self.headers.items())
        body = self.rfile.read(int(headers["Content-Length"]))
        url = "http://" + headers.get("Host", "localhost") + self.path
        request = AWSPreparedRequest(self.command, url, headers, body, False)
        try:
            with service_lock:
                status, out_headers, content = response_class.dispatch(request, url, headers)
        except ClientError as e:
            status, out_headers, content = 400, {}, e.response["Error"]["Message"]
        except Exception as e:  # what the WSGI path answers: a 500 that says why
            traceback.print_exc()
            status, out_headers, content = 500, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(
                {"__type": "InternalFailure", "message": "moto: %s: %s" % (type(e).__name__, e)})
        if isinstance(content, str):
            content = content.encode()
        self.send_response_only(int(status))
        for k, v in out_headers.items():
            if k.lower() not in ("status", "content-length"):
                self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(content)))
        # Headers and body in one write: a second small write waits for
        # the client's delayed ACK (Nagle), 40 ms a response.
        self._headers_buffer.append(b"\r\n" + content)
        self.flush_headers()


lock = threading.Lock()
app = DomainDispatcherApplication(create_backend_app)
# Whole prefixes: DynamoDB Streams ("DynamoDBStreams_20120810.") is another
# handler, served by the WSGI path.
_direct = {"DynamoDB_20120810.": (DynamoHandler, lock), "AmazonSQS.": (SQSResponse, contextlib.nullcontext())}


def serial(environ, start_response):
    if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
        return app(environ, start_response)
    with lock:
        return list(app(environ, start_response))


def serve(host, port, port_file):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = make_server(host, port, serial, threaded=True, request_handler=Handler)
    # With port 0 the server takes a free port itself, leaving no gap
    # between choosing a port and binding it in which another process could
    # take it; StartMoto reads the port from the file it named (its own: a
    # log may be shared by several servers).
    print("moto_serial: listening on %s:%d" % (host, server.port), flush=True)
    if port_file:
        with open(port_file, "w") as f:
            f.write("%d\n" % server.port)
    server.serve_forever()


def _die_with_parent():
    # The kernel kills this process when its parent ends (prctl
    # PR_SET_PDEATHSIG), as Go's Pdeathsig does for a server it starts.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def _die_with(pid):
    # The server ends when the test process that asked for it does (killed
    # by go test's -timeout, a crash), as a server that process starts
    # itself dies with it (Pdeathsig), instead of idling on to the end of
    # the run. A pidfd is readable once the process has ended.
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(0)
    except (AttributeError, OSError):
        def poll():
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    os._exit(0)
                except OSError:
                    pass
                threading.Event().wait(0.5)
        threading.Thread(target=poll, daemon=True).start()
        return

    def watch():
        select.select([fd], [], [])
        os._exit(0)
    threading.Thread(target=watch, daemon=True).start()


def _answer(conn, b):
    # A client that has gone (killed mid-request, or past its deadline)
    # costs only its own request: the zygote, and every server it forked,
    # go on.
    try:
        conn.sendall(b)
        return True
    except OSError:
        return False


def zygote(path):
    """Serve start requests on the Unix socket at path: a JSON line
    {"port_file": ..., "log": ...} forks a server (serve, on a free
    127.0.0.1 port named in port_file, its output appended to log or
    discarded) and is answered with the server's pid. The fork starts with
    moto imported: a fresh interpreter spends about a second of CPU on the
    imports above, in each of the dozens of servers a test run starts. Each
    server is its own process group and dies with the zygote, which dies
    with its parent."""
    _die_with_parent()
    # As StartMoto sets it for a server it starts (moto reads it per call).
    os.environ["MOTO_ALLOW_NONEXISTENT_REGION"] = "true"
    # Children are reaped as they end, so a stopped server leaves no
    # zombie and kill(pid, 0) tells the test process it is gone.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound and listening before it has its name: a client that finds the
    # path can connect.
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)
    while True:
        conn, _ = listener.accept()
        with conn:
            # A client that connects and says nothing cannot hold up the
            # others' starts.
            conn.settimeout(10)
            try:
                client = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
                req = json.loads(conn.makefile("r").readline())
                port_file, log = req["port_file"], req.get("log") or os.devnull
            except (ValueError, KeyError, TypeError, OSError) as e:
                _answer(conn, b"error %s\n" % str(e).encode())
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    listener.close()
                    conn.close()
                    os.setpgid(0, 0)
                    # At its client's priority, as a server the client
                    # started itself would run: make test runs some
                    # packages at nice 19 to leave the CPU to the soak.
                    with contextlib.suppress(OSError):
                        os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, client))
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _die_with_parent()
                    _die_with(client)
                    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                    os.dup2(fd, 1)
                    os.dup2(fd, 2)
                    os.close(fd)
                    # Both sources of randomness, as a fresh interpreter
                    # seeds them: moto draws its ids (SQS message ids and
                    # receipt handles, stream event ids) from its own.
                    random.seed()
                    mock_random.seed()
                    serve("127.0.0.1", 0, port_file)
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            if not _answer(conn, b"%d\n" % pid):
                # Nobody will Stop it.
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


if sys.argv[1] == "--zygote":
    zygote(sys.argv[2])
else:
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
