"""An OTLP/HTTP sink for bench/otlp_send.sh: answers every POST /v1/metrics 200 with an empty
ExportMetricsServiceResponse (an empty body in protobuf, {} in JSON) and counts requests and
bytes, so that what is measured is the sender. Prints "listening on PORT" once it listens;
GET /count answers "REQUESTS BYTES"."""
import http.server
import sys
import threading

count = [0, 0]
lock = threading.Lock()


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            count[0] += 1
            count[1] += len(body)
        json = self.headers.get("Content-Type", "").startswith("application/json")
        answer = b"{}" if json else b""
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if json else "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self):
        with lock:
            answer = f"{count[0]} {count[1]}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
