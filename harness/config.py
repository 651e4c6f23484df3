"""Harness settings: `$HARNESS_HOME/config.yaml` (or `HARNESS_CONFIG`), validated.

Settings are machine-level defaults; a campaign file overrides them field by field.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import ConfigError
from harness.images import DOCKER_BASE
from harness.paths import harness_home

DEFAULT_IMAGE_OVERRIDES = {
    "debian:*": DOCKER_BASE,
    "debian": DOCKER_BASE,
    "ubuntu:*": DOCKER_BASE,
    "ubuntu": DOCKER_BASE,
    "python:*": DOCKER_BASE,
}


class Settings(BaseModel):
    """Machine-level defaults of the harness."""

    model_config = ConfigDict(extra="forbid")
    image_overrides: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_IMAGE_OVERRIDES))
    docker_host: str = ""  # the harness's own engine (its socket) when empty
    docker_pool: str = "10.213.0.0/16"
    docker_prefix: int = Field(default=24, ge=16, le=28)
    docker_pids_limit: int = Field(default=4096, ge=64, le=1048576)

    def map_image(self, ref: str) -> str:
        """Map a foreign `FROM` reference to a local base (glob patterns allowed)."""
        if ref in self.image_overrides:
            return self.image_overrides[ref]
        for pattern, target in self.image_overrides.items():
            if fnmatch.fnmatchcase(ref, pattern):
                return target
        return ref


def config_path() -> Path:
    return Path(os.environ.get("HARNESS_CONFIG", harness_home() / "config.yaml"))


def load_settings(path: Path | None = None) -> Settings:
    path = path or config_path()
    if not path.exists():
        return Settings()
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=str(path)) from exc
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of settings", file=str(path))
    overrides = {**DEFAULT_IMAGE_OVERRIDES, **(raw.pop("image_overrides", None) or {})}
    try:
        return Settings(image_overrides=overrides, **raw)
    except ValidationError as exc:
        e = exc.errors()[0]
        valid = ", ".join(Settings.model_fields)
        raise ConfigError(f"{e['msg']} (valid keys: {valid})", file=str(path),
                          key=".".join(map(str, e["loc"]))) from exc
