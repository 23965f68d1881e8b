"""MLflow tracking: the store, one run per configuration, the sweep's parent run and its report, the model
registry. ``flows.tracking.MultirunParentRun`` is the Hydra callback path configs before 0.2 name."""
from flows.tracking.parent import MultirunParentRun

__all__ = ["MultirunParentRun"]
