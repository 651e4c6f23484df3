"""Named test doubles, only for boundaries this machine cannot reach (hosted model APIs).

- `FakeChatCompletionsServer` stands in for a hosted OpenAI-compatible chat-completions API.
- `FakeClaudeCli` stands in for the hosted model behind the real Claude Code CLI.

Everything else in the tests is real: Docker, Terraform, Ansible, the agents' code.
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Reply = int | str | dict | Callable[[dict], Any]


def tool_call_reply(command: str, call_id: str, usage: dict | None = None) -> dict:
    """A chat-completions response whose assistant message calls `shell` with `command`."""
    message = {"role": "assistant", "content": None, "tool_calls": [{
        "id": call_id, "type": "function",
        "function": {"name": "shell", "arguments": json.dumps({"command": command})}}]}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            **({"usage": usage} if usage else {})}


def final_reply(text: str, usage: dict | None = None) -> dict:
    """A chat-completions response with a plain assistant answer (no tool call)."""
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}], **({"usage": usage} if usage else {})}


class FakeChatCompletionsServer:
    """A test double of the hosted OpenAI chat-completions API, not the real service.

    Serves `POST /v1/chat/completions` on 127.0.0.1 (random port) from a scripted list of
    replies, in order: an int is an HTTP error status; a str is the assistant's content; a
    dict with `choices` is sent as the whole response; a callable gets the request body and
    returns one of those. Records each request's path, headers and JSON body. `error_body`
    is what error statuses carry (a real API may echo things back; tests check it is not
    stored).
    """

    def __init__(self, replies: list[Reply], error_body: str = '{"error": "scripted"}'):
        self.replies = list(replies)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                server.requests.append({"path": self.path, "headers": dict(self.headers),
                                        "body": body})
                reply = server.replies.pop(0) if server.replies else 500
                if callable(reply):
                    reply = reply(body)
                if isinstance(reply, int):
                    self.send_response(reply)
                    self.end_headers()
                    self.wfile.write(error_body.encode())
                    return
                if isinstance(reply, str):
                    reply = final_reply(reply)
                payload = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


CLAUDE_RESULT = {
    "type": "result", "subtype": "success", "is_error": False, "duration_ms": 5321,
    "num_turns": 3, "result": "Created /srv/hello/greeting.txt.", "session_id": "fake-session",
    "total_cost_usd": 0.0421,
    "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 300,
              "cache_read_input_tokens": 4500, "output_tokens": 250},
}


class FakeClaudeCli:
    """A test double of the hosted model behind the real Claude Code CLI (`claude`).

    It is a bash script installed as /usr/local/bin/claude in a task image. Like the real
    CLI it refuses to run as root without IS_SANDBOX=1 and without ANTHROPIC_API_KEY, takes
    the prompt as its last argument (saved to /tmp/fake-claude-prompt.txt), runs one shell
    command in a child `bash -c` (what the model's Bash tool call would run), and prints a
    recorded `--output-format json` result with usage and total_cost_usd. With
    `leak=True` it also prints the key on stderr and puts it on a child's command line, as
    a careless tool might, so tests can check the harness redacts it everywhere.
    """

    def __init__(self, command: str, result: dict | None = None, leak: bool = False):
        self.command, self.result, self.leak = command, result or CLAUDE_RESULT, leak

    def script(self) -> str:
        leak = ('echo "fake-claude: using key $ANTHROPIC_API_KEY" >&2\n'
                '/bin/echo "key=$ANTHROPIC_API_KEY" >/dev/null\n') if self.leak else ""
        return (
            "#!/bin/bash\n# FakeClaudeCli: a test double of the hosted model behind `claude`.\n"
            'if [ "$(id -u)" = 0 ] && [ "$IS_SANDBOX" != 1 ]; then\n'
            '  echo "--dangerously-skip-permissions cannot be used with root" >&2; exit 1; fi\n'
            'if [ -z "$ANTHROPIC_API_KEY" ]; then\n'
            '  echo \'{"type":"result","is_error":true,"result":"Invalid API key"}\'; exit 1; fi\n'
            'printf "%s" "${@: -1}" > /tmp/fake-claude-prompt.txt\n'
            f"{leak}bash -c {shlex.quote(self.command)}\n"
            f"cat <<'FAKE_EOF'\n{json.dumps(self.result)}\nFAKE_EOF\n")

    def install(self, task_dir: Path) -> None:
        """Bake the script into the task's image (environment/Dockerfile)."""
        env = task_dir / "environment"
        (env / "claude").write_text(self.script())
        dockerfile = env / "Dockerfile"
        dockerfile.write_text(dockerfile.read_text().rstrip("\n") +
                              "\nCOPY claude /usr/local/bin/claude\n"
                              "RUN chmod 0755 /usr/local/bin/claude\n")
