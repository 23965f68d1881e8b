"""The names of the headline metrics, as every writer and reader of them spells them: the per-configuration metrics
logged to MLflow, the report's and the regression gate's columns, the traces' assessments."""

BERTSIM = "bertsim"  # mean cosine of the gold and generated answers' embeddings (the yardstick)
LRCR = "lrcr"  # share of answers whose predicted relation is the gold one
OPI_1 = "opi_1"  # OPI at beta 1 (pooled): the headline with gold relations
HEADLINE = (OPI_1, BERTSIM, LRCR)
