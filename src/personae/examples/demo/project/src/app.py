"""weather-service: answers GET /weather?city=NAME (sample code for the personae demo)."""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import yaml

__all__ = ["Handler"]

SETTINGS = yaml.safe_load((Path(__file__).parent.parent / "config" / "settings.yaml").read_text())


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"city": self.path.rpartition("=")[2], "forecast": "sunny"}).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    HTTPServer((SETTINGS["host"], SETTINGS["port"]), Handler).serve_forever()
