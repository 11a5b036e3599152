"""`gpuc schema`: JSON Schema of the input kinds, for editors (yaml-language-server) and CI linters."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from ..validate.intents import Cluster, GpuDeviceClass, GpuWorkload

Document = Annotated[Cluster | GpuWorkload | GpuDeviceClass, Field(discriminator="kind")]


def input_schema() -> dict[str, Any]:
    schema = TypeAdapter(Document).json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://gpuc.dev/schemas/v1alpha1.json"
    schema["title"] = "gpuc intent document (gpuc.dev/v1alpha1): Cluster, GpuWorkload or GpuDeviceClass"
    return schema
