"""The MLflow model registry: a registered relation classifier named by alias resolved to its version, so that a
new version under the alias is not served from the cache of the old one."""
from __future__ import annotations

import logging

from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from flows.base.errors import CommandError
from flows.orchestration.tasks import RegisteredModel
from opi.schemas import OPIConfig

log = logging.getLogger("opi")


def resolve_registered(config: OPIConfig) -> RegisteredModel | None:
    """``classifier.registered`` (``models:/name@alias`` or ``models:/name/<version>``) as a version and the place
    its files are; None when the classifier is not a registered model."""
    uri = config.classifier.registered
    if not uri:
        return None
    client = MlflowClient(config.tracking.tracking_uri)
    name, _, rest = uri.removeprefix("models:/").partition("@")
    try:
        if rest:
            version = client.get_model_version_by_alias(name, rest).version
            log.info("relation classifier %s is version %s (no cross-fitting: it was trained elsewhere)", uri, version)
        else:
            name, _, version = name.partition("/")
        return RegisteredModel(f"models:/{name}/{version}", client.get_model_version_download_uri(name, version))
    except MlflowException as err:
        said = str(err.message).strip().splitlines()[0] if str(err.message).strip() else type(err).__name__
        models = client.search_registered_models(max_results=20)
        known = ", ".join(m.name + (f" (@{', @'.join(sorted(m.aliases))})" if m.aliases else "") for m in models)
        raise CommandError(f"classifier.registered={uri}: {said}. " + (
            f"This store registers {known}: name one as models:/<name>@<alias> or models:/<name>/<version>"
            if models else "This store registers no model: train one with opi-train-classifier, or point "
                           "tracking.tracking_uri at the store that registers it")) from None
