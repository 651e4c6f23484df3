"""The docker substrate's section of config.yaml (`substrates: {docker: {...}}`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.config import load_settings


class DockerSettings(BaseModel):
    """`host`: the engine endpoint (empty: the harness's own engine, see `engine`);
    `pool`/`prefix`: where trial subnets come from; `pids_limit`: per node."""

    model_config = ConfigDict(extra="forbid")
    host: str = ""
    pool: str = "10.213.0.0/16"
    prefix: int = Field(default=24, ge=16, le=28)
    pids_limit: int = Field(default=4096, ge=64, le=1048576)


def docker_settings() -> DockerSettings:
    return load_settings().substrate("docker", DockerSettings)
