"""The portal side of a geni-lib profile script: `geni.portal` as CloudLab's portal runs it.

A CloudLab profile is a Python script that imports `geni.portal` and `geni.rspec.pg`,
declares parameters, binds them and prints a request RSpec. On the portal, the script runs
with the experiment's `bindings` as its parameter values. geni-lib's `geni.rspec.pg` (PyPI
`geni-lib`) builds the RSpec here for real; its `geni.portal` module on PyPI is Python 2
only (print statements), so this module stands in for it: the same names
(`Context`, `ParameterType`, `ParameterError`, `context`), parameters bound from the
bindings given to the runner instead of the command line.

Run as the local portal and the harness run scripts (`harness.substrates.cloudlab.profile`):
``python -m harness.substrates.cloudlab.geni_portal BINDINGS_JSON < script.py`` prints one
JSON object: {"rspec": "<rspec ...>", "parameters": {name: value}} or {"error": "..."}.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
import types


class ParameterType:
    """Parameter types understood by Context.defineParameter()."""

    INTEGER = "integer"
    STRING = "string"
    BOOLEAN = "boolean"
    IMAGE = "image"
    AGGREGATE = "aggregate"
    NODETYPE = "nodetype"
    BANDWIDTH = "bandwidth"
    LATENCY = "latency"
    SIZE = "size"
    PUBKEY = "pubkey"
    LOSSRATE = "lossrate"

    argparsemap = {INTEGER: int, STRING: str, BOOLEAN: bool, IMAGE: str, AGGREGATE: str,
                   NODETYPE: str, BANDWIDTH: float, LATENCY: float, SIZE: int, PUBKEY: str,
                   LOSSRATE: float}


class PortalError(Exception):
    """Everything the context raises."""


class ParameterError(PortalError):
    def __init__(self, message: str, params: list[str] | None = None):
        super().__init__(message)
        self.params = params or []


class Context:
    """The portal context (a singleton, like geni-lib's): parameters in, request out."""

    _instance: Context | None = None
    bindings: dict = {}

    def __new__(cls, *args, **kwargs):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._setup()
        return cls._instance

    def _setup(self) -> None:
        self.parameters: dict[str, dict] = {}
        self.values: dict[str, object] = {}
        self.errors: list[str] = []
        self.request = None
        self.printed: str | None = None

    def defineParameter(self, name, description, typ, defaultValue, legalValues=None,  # noqa: N802
                        longDescription=None, advanced=False, groupId=None, hide=False,
                        prefix="emulab.net.parameter.", inputFrameAttrs=None,
                        inputConstraints=None):
        if typ not in ParameterType.argparsemap:
            raise ParameterError(f"parameter {name}: unknown type {typ!r}", [name])
        self.parameters[name] = {"description": description, "type": typ,
                                 "defaultValue": defaultValue,
                                 "legalValues": list(legalValues or [])}

    def defineParameterGroup(self, groupId, groupName):  # noqa: N802
        return None

    def bindParameters(self, altParamSrc=None):  # noqa: N802
        given = dict(altParamSrc) if isinstance(altParamSrc, dict) else dict(self.bindings)
        unknown = sorted(set(given) - set(self.parameters))
        if unknown:
            self.errors.append(f"bindings name undeclared parameter(s) {unknown}; declared: "
                               f"{sorted(self.parameters)}")
        ns = types.SimpleNamespace()
        for name, opts in self.parameters.items():
            value = given.get(name, opts["defaultValue"])
            try:
                value = _coerce(value, opts)
            except (TypeError, ValueError):
                self.errors.append(f"parameter {name}: cannot use {value!r} as {opts['type']}")
                continue
            legal = [v[0] if isinstance(v, tuple | list) else v for v in opts["legalValues"]]
            if legal and value not in legal:
                self.errors.append(f"parameter {name}: {value!r} is not one of {legal}")
                continue
            setattr(ns, name, value)
            self.values[name] = value
        self.verifyParameters()  # as geni-lib's: a bad binding does not return
        return ns

    def reportError(self, parameterError, immediate=False):  # noqa: N802
        self.errors.append(str(parameterError))
        if immediate:
            self.verifyParameters()

    def reportWarning(self, parameterError):  # noqa: N802
        return None

    def verifyParameters(self):  # noqa: N802
        if self.errors:
            raise ParameterError("; ".join(self.errors))

    def makeRequestRSpec(self):  # noqa: N802
        import geni.rspec.pg as pg

        self.request = pg.Request()
        return self.request

    def printRequestRSpec(self, rspec=None):  # noqa: N802
        rspec = rspec or self.request
        if rspec is None:
            raise PortalError("printRequestRSpec: no request (call makeRequestRSpec first)")
        xml = rspec.toXMLString(pretty_print=True)
        self.printed = xml.decode() if isinstance(xml, bytes) else xml

    def suppressAutoPrint(self):  # noqa: N802
        return None


def _coerce(value, opts: dict):
    if opts["type"] == ParameterType.BOOLEAN or isinstance(opts["defaultValue"], bool):
        if isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(value)
            return value.lower() in ("true", "1")
        return bool(value)
    return ParameterType.argparsemap[opts["type"]](value)


def run(script: str, bindings: dict) -> dict:
    """Run one profile script with its bindings; the request RSpec and bound parameters."""
    import geni

    module = sys.modules[__name__]
    sys.modules["geni.portal"] = module
    geni.portal = module
    Context._instance = None
    Context.bindings = bindings
    try:
        exec(compile(script, "profile.py", "exec"), {"__name__": "__main__"})  # noqa: S102
        ctx = Context()
        if ctx.printed is None and ctx.request is not None:
            ctx.printRequestRSpec()
        if ctx.printed is None:
            return {"error": "the script printed no request RSpec (no makeRequestRSpec / "
                             "printRequestRSpec)"}
        return {"rspec": ctx.printed, "parameters": ctx.values}
    except PortalError as exc:
        return {"error": str(exc)}
    except Exception:  # noqa: BLE001 - the script's own error, as the portal reports it
        return {"error": traceback.format_exc(limit=3).strip().splitlines()[-1]}


def context() -> Context:
    return Context()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.substrates.cloudlab.geni_portal")
    parser.add_argument("bindings", nargs="?", default="{}", help="JSON object")
    args = parser.parse_args()
    out = run(sys.stdin.read(), json.loads(args.bindings))
    print(json.dumps(out, default=str))
    return 0 if "rspec" in out else 1


if __name__ == "__main__":
    sys.exit(main())
