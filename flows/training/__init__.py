"""Training the relation classifier (``opi-train-classifier``)."""
