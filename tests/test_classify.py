

def test_training_warnings_name_rare_relations_and_a_classifier_no_better_than_the_majority():
    from opi.classify import training_warnings

    labels = ["deductive"] * 6 + ["fuzzy"] * 4 + ["temporal"] * 2
    rare, chance = training_warnings(labels, cv_accuracy=0.5)  # majority: 6 of 12 = 0.5
    assert "fewer than 5 labelled examples of 2 of its 3 relations (fuzzy, temporal)" in rare
    assert "(0.500) is no better than always naming the most common relation (0.500)" in chance
    assert training_warnings(["deductive"] * 5 + ["fuzzy"] * 5, cv_accuracy=0.8) == []
    assert len(training_warnings([f"r{i}" for i in range(10)], cv_accuracy=0.0)) == 2  # the 10 rows
