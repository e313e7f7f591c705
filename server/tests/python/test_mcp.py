"""skillstore's MCP server through the official Python SDK (the `mcp`
package), a client written independently of the server's own SDK, and the
Skills extension as raw JSON-RPC.

Usage: python test_mcp.py PATH/TO/skillstore

Builds a two-layer skills tree in a temporary directory, then checks, over
stdio (`skillstore mcp`) and over streamable HTTP (`skillstore serve`, a
bearer token from the environment):
- the SDK's client: initialize, list and call every tool, read resources,
  get the prompt;
- raw JSON-RPC: skills/list, skills/get, resources/read and
  resources/directory/read; every digest equals the SHA-256 of the bytes
  read, every frontmatter equals the file's, every listed resource is
  readable and a path outside a skill is not.
Prints `N passed, M failed` and exits non-zero on any failure.
"""

import asyncio
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
import urllib.error
import urllib.request
from pathlib import Path

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

TOKEN = "python-client-token"
RESULTS = {"passed": 0, "failed": 0}


def check(name, condition, detail=""):
    if condition:
        RESULTS["passed"] += 1
    else:
        RESULTS["failed"] += 1
        print(f"FAILED: {name} {detail}", file=sys.stderr)


def skill_md(name, description):
    return f"---\nname: {name}\ndescription: {description}\nmetadata:\n  owner: team\n---\n# {name}\n\nSteps.\n"


def make_tree(root: Path):
    files = {
        "base/alpha/SKILL.md": skill_md("alpha", "Alpha from base."),
        "base/beta/SKILL.md": skill_md("beta", "Beta, the base way."),
        "base/beta/scripts/run.py": "print('beta')\n",
        "team/alpha/SKILL.md": skill_md("alpha", "Alpha, the team's way."),
        "team/alpha/references/guide.md": "# Team guide\n",
        "skillstore.yaml": "sources:\n  - path: /base\n  - path: /team\n    writable: true\n",
        "tenants.yaml": (
            "tenants:\n  - name: team\n    tokens:\n      - env: SKILLSTORE_PY_TOKEN\n        scope: write\n"
            "    config:\n      sources:\n        - path: /base\n        - path: /team\n          writable: true\n"
        ),
    }
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def frontmatter_of(text):
    """The flat keys and one level of `metadata` of a frontmatter written
    by make_tree: enough to compare with the server's JSON."""
    block = text.split("---\n")[1]
    out, current = {}, None
    for line in block.splitlines():
        if line.startswith("  ") and current is not None:
            key, value = line.strip().split(": ", 1)
            out[current][key] = value
        elif line.endswith(":"):
            current = line[:-1]
            out[current] = {}
        else:
            key, value = line.split(": ", 1)
            out[key], current = value, None
    return out


def text_of(result):
    return result.content[0].text


async def sdk_checks(label, client):
    tools = sorted(t.name for t in (await client.list_tools()).tools)
    check(f"{label}: tools", tools == sorted(
        ["list_skills", "search_skills", "load_skill", "read_skill_file", "create_skill", "patch_skill", "write_skill_file",
         "delete_skill", "skill_history", "rollback_skill"]
    ), tools)
    for tool in (await client.list_tools()).tools:
        check(f"{label}: {tool.name} has an input schema", tool.input_schema.get("type") == "object")

    listed = await client.call_tool("list_skills", {})
    names = [s["name"] for s in listed.structured_content["skills"]]
    check(f"{label}: list_skills", names == ["alpha", "beta"], names)
    filtered = await client.call_tool("list_skills", {"query": "base way"})
    check(f"{label}: list_skills query", [s["name"] for s in filtered.structured_content["skills"]] == ["beta"])
    found = await client.call_tool("search_skills", {"query": "the team's way", "limit": 5})
    results = found.structured_content["results"]
    check(f"{label}: search_skills", [r["name"] for r in results][:1] == ["alpha"] and not found.is_error, results)
    check(f"{label}: search_skills gives the winner and its URI",
          results[0]["source"] == "team" and results[0]["uri"] == "skill://alpha/SKILL.md"
          and results[0]["path"] == "/team/alpha/SKILL.md" and results[0]["score"] > 0, results)
    followed = await client.read_resource(results[0]["uri"])
    check(f"{label}: a search result's URI reads its SKILL.md", "Alpha, the team's way." in followed.contents[0].text)
    nothing = await client.call_tool("search_skills", {"query": "zebra"})
    check(f"{label}: search_skills without a match", nothing.structured_content["results"] == [])
    bad = await client.call_tool("search_skills", {"query": "team", "limit": 0})
    check(f"{label}: search_skills refuses a bad limit", bad.is_error and text_of(bad).startswith("bad_request"), text_of(bad))
    loaded = await client.call_tool("load_skill", {"name": "alpha"})
    check(f"{label}: load_skill", "Alpha, the team's way." in text_of(loaded) and not loaded.is_error)
    check(f"{label}: load_skill files", loaded.structured_content["files"] == ["references/guide.md"])
    file = await client.call_tool("read_skill_file", {"name": "alpha", "path": "references/guide.md"})
    check(f"{label}: read_skill_file", text_of(file) == "# Team guide\n", text_of(file))
    escape = await client.call_tool("read_skill_file", {"name": "alpha", "path": "../beta/SKILL.md"})
    check(f"{label}: a path out of the skill is a tool error", escape.is_error and text_of(escape).startswith("invalid_path"))
    missing = await client.call_tool("load_skill", {"name": "nope"})
    check(f"{label}: an unknown skill is a tool error", missing.is_error and text_of(missing).startswith("skill_not_found"))

    created = await client.call_tool("create_skill", {"name": "gamma", "content": skill_md("gamma", "Gamma.")})
    check(f"{label}: create_skill", not created.is_error, text_of(created))
    wrote = await client.call_tool("write_skill_file", {"name": "gamma", "path": "references/n.md", "content": "n\n"})
    check(f"{label}: write_skill_file", not wrote.is_error, text_of(wrote))
    patched = await client.call_tool("patch_skill", {"name": "gamma", "find": "Gamma.", "replace": "Gamma, patched."})
    check(f"{label}: patch_skill", not patched.is_error, text_of(patched))
    again = await client.call_tool("load_skill", {"name": "gamma"})
    check(f"{label}: the patch is read back", "Gamma, patched." in text_of(again))
    found = await client.call_tool("search_skills", {"query": "patched"})
    check(f"{label}: search_skills sees a write", [r["name"] for r in found.structured_content["results"]] == ["gamma"],
          found.structured_content)
    # A deleted skill keeps its history, so an earlier run's entries may come first.
    entries = (await client.call_tool("skill_history", {"name": "gamma"})).structured_content["entries"]
    actions = [e["action"] for e in entries[-3:]]
    check(f"{label}: skill_history", actions == ["create", "write_file", "patch"], actions)
    rolled = await client.call_tool("rollback_skill", {"name": "gamma", "id": entries[-3]["id"]})
    check(f"{label}: rollback_skill", not rolled.is_error, text_of(rolled))
    back = await client.call_tool("load_skill", {"name": "gamma"})
    check(f"{label}: the rollback is read back", "Gamma." in text_of(back) and "patched" not in text_of(back))
    deleted = await client.call_tool("delete_skill", {"name": "gamma"})
    check(f"{label}: delete_skill", not deleted.is_error, text_of(deleted))

    resources = [str(r.uri) for r in (await client.list_resources()).resources]
    check(f"{label}: resources", resources == ["skill://alpha/SKILL.md", "skill://beta/SKILL.md"], resources)
    templates = (await client.list_resource_templates()).resource_templates
    check(f"{label}: resource template", templates[0].uri_template == "skill://{name}/{+path}")
    read = await client.read_resource("skill://beta/scripts/run.py")
    check(f"{label}: read_resource", read.contents[0].text == "print('beta')\n")

    prompts = [p.name for p in (await client.list_prompts()).prompts]
    check(f"{label}: prompts", prompts == ["skills"], prompts)
    prompt = await client.get_prompt("skills", {"style": "xml", "max_chars": "4000"})
    check(f"{label}: get_prompt", "<available_skills>" in prompt.messages[0].content.text)


class RawHttp:
    """JSON-RPC over streamable HTTP with nothing but the standard library."""

    def __init__(self, url):
        self.url, self.session, self.next_id, self.version = url, None, 1, "2025-11-25"

    def request(self, method, params=None):
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.next_id += 1
        return self._post(body)

    def notify(self, method):
        self._post({"jsonrpc": "2.0", "method": method})

    def _post(self, body):
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "authorization": f"Bearer {TOKEN}",
            "mcp-protocol-version": self.version,
        }
        if self.session:
            headers["mcp-session-id"] = self.session
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        with urllib.request.urlopen(request) as response:
            self.session = response.headers.get("mcp-session-id", self.session)
            text = response.read().decode()
        if "id" not in body:
            return None
        for line in text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if message.get("id") == body["id"]:
                    return message
        if text.strip().startswith("{"):
            return json.loads(text)
        raise AssertionError(f"no answer to {body['method']}: {text!r}")


class RawStdio:
    """JSON-RPC over a child's stdin and stdout, one message a line."""

    def __init__(self, command, cwd):
        self.process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.next_id = 1

    def request(self, method, params=None):
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.next_id += 1
        self.process.stdin.write(json.dumps(body) + "\n")
        self.process.stdin.flush()
        while True:
            message = json.loads(self.process.stdout.readline())
            if message.get("id") == body["id"]:
                return message

    def notify(self, method):
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.process.stdin.flush()

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def resource_bytes(answer):
    contents = answer["result"]["contents"][0]
    if "text" in contents:
        return contents["text"].encode()
    return base64.b64decode(contents["blob"])


def extension_checks(label, rpc, tree):
    init = rpc.request("initialize", {
        "protocolVersion": "2025-11-25",
        "capabilities": {"extensions": {"io.modelcontextprotocol/skills": {}}},
        "clientInfo": {"name": "raw", "version": "0"},
    })
    extension = init["result"]["capabilities"].get("extensions", {}).get("io.modelcontextprotocol/skills")
    check(f"{label}: the extension is declared with directoryRead", extension == {"directoryRead": True}, init)
    rpc.notify("notifications/initialized")

    listed = rpc.request("skills/list")
    skills = listed["result"]["skills"]
    check(f"{label}: skills/list", [s["uri"] for s in skills] == ["skill://alpha/SKILL.md", "skill://beta/SKILL.md"])
    for skill in skills:
        name = skill["frontmatter"]["name"]
        source = "team" if name == "alpha" else "base"
        expected = frontmatter_of((tree / source / name / "SKILL.md").read_text())
        check(f"{label}: frontmatter of {name}", skill["frontmatter"] == expected, (skill["frontmatter"], expected))
        for resource in skill["resources"]:
            answer = rpc.request("resources/read", {"uri": resource["uri"]})
            data = resource_bytes(answer)
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            check(f"{label}: digest of {resource['uri']}", resource["digest"] == digest)
        got = rpc.request("skills/get", {"uri": skill["uri"]})
        check(f"{label}: skills/get {name}", got["result"]["skill"] == skill)
    unknown = rpc.request("skills/get", {"uri": "skill://nope/SKILL.md"})
    check(f"{label}: skills/get of an unknown skill is -32602", unknown.get("error", {}).get("code") == -32602, unknown)
    for uri in ["skill://alpha/../beta/SKILL.md", "skill://alpha/references/missing.md", "skill://alpha/%2E%2E/beta/SKILL.md"]:
        answer = rpc.request("resources/read", {"uri": uri})
        check(f"{label}: {uri} is not readable", "error" in answer, answer)
    root = rpc.request("resources/directory/read", {"uri": "skill://alpha"})
    children = sorted((r["uri"], r.get("mimeType")) for r in root["result"]["resources"])
    check(f"{label}: resources/directory/read", children == [
        ("skill://alpha/SKILL.md", "text/markdown; charset=utf-8"),
        ("skill://alpha/references", "inode/directory"),
    ], children)


async def main(binary):
    with tempfile.TemporaryDirectory() as directory:
        tree = Path(directory)
        make_tree(tree)

        # stdio
        async with Client(StdioServerParameters(command=binary, args=["mcp"], cwd=str(tree))) as client:
            await sdk_checks("stdio", client)
        raw = RawStdio([binary, "mcp"], tree)
        try:
            extension_checks("stdio raw", raw, tree)
        finally:
            raw.close()

        # streamable HTTP, with a token from the environment
        env = dict(os.environ, SKILLSTORE_PY_TOKEN=TOKEN)
        server = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--tenants", "tenants.yaml"],
            cwd=tree, env=env, stderr=subprocess.PIPE, text=True,
        )
        try:
            base = None
            for line in server.stderr:
                found = re.search(r"on (http://\S+)", line)
                if found:
                    base = found.group(1)
                    break
            for _ in range(2000):
                try:
                    with urllib.request.urlopen(f"{base}/readyz") as ready:
                        if ready.status == 200:
                            break
                except urllib.error.HTTPError:
                    await asyncio.sleep(0.01)
            try:
                urllib.request.urlopen(urllib.request.Request(f"{base}/mcp", data=b"{}", method="POST"))
                check("http: no token, no answer", False)
            except urllib.error.HTTPError as err:
                check("http: no token is 401", err.code == 401, err.code)
            http = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"})
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
                await sdk_checks("http", client)
            extension_checks("http raw", RawHttp(f"{base}/mcp"), tree)
        finally:
            server.terminate()
            check("http: the server exits 0 on SIGTERM", server.wait(timeout=60) == 0)


if __name__ == "__main__":
    try:
        asyncio.run(main(os.path.abspath(sys.argv[1])))
    except Exception:
        traceback.print_exc()
        RESULTS["failed"] += 1
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    sys.exit(1 if RESULTS["failed"] else 0)
