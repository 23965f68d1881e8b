

def test_training_warnings_name_rare_relations_and_a_classifier_no_better_than_the_majority():
    from opi.classify import training_warnings

    labels = ["deductive"] * 6 + ["fuzzy"] * 4 + ["temporal"] * 2
    rare, chance = training_warnings(labels, cv_accuracy=0.5)  # majority: 6 of 12 = 0.5
    assert "fewer than 5 labelled examples of 2 of its 3 relations (fuzzy, temporal)" in rare
    assert "(0.500) is no better than always naming the most common relation (0.500)" in chance
    assert training_warnings(["deductive"] * 5 + ["fuzzy"] * 5, cv_accuracy=0.8) == []
    assert len(training_warnings([f"r{i}" for i in range(10)], cv_accuracy=0.0)) == 2  # the 10 rows


def test_a_pipeline_saved_when_its_embedding_step_lived_in_opi_classify_still_loads():
    import io
    import zipfile

    import skops.io as sio

    from flows.train_classifier import TRUSTED_TYPES
    from opi.classify import relation_pipeline
    from opi.relation_features import SentenceEmbeddingFeatures

    saved = zipfile.ZipFile(io.BytesIO(sio.dumps(relation_pipeline(embedding_model="some-model"))))
    renamed = io.BytesIO()
    with zipfile.ZipFile(renamed, "w") as older:  # as saved before the step moved to opi.relation_features
        for item in saved.infolist():
            content = saved.read(item.filename)
            older.writestr(item, content.replace(b"opi.relation_features", b"opi.classify")
                           if item.filename == "schema.json" else content)
    untrusted = sio.get_untrusted_types(data=renamed.getvalue())
    assert "opi.classify.SentenceEmbeddingFeatures" in untrusted
    pipeline = sio.loads(renamed.getvalue(), trusted=[t for t in untrusted if t in TRUSTED_TYPES or
                                                      t.startswith(("sklearn.", "numpy."))] or None)
    step = pipeline.named_steps["features"].transformers[0][1]
    assert isinstance(step, SentenceEmbeddingFeatures) and step.model == "some-model"


def test_building_the_classifier_config_imports_no_scikit_learn():
    import subprocess
    import sys

    code = ("import sys, flows.tasks; from opi.classify import LocalRelationClassifier; LocalRelationClassifier(); "
            "print('sklearn' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"  # a warm re-run needs none (~1.5 s per command)
