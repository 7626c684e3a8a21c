from charlm.corpus import RELATIONS, make_corpus


def test_corpus_is_deterministic_and_consistent():
    a = make_corpus(n_people=20, train_sentences=500, val_sentences=50, seed=1)
    b = make_corpus(n_people=20, train_sentences=500, val_sentences=50, seed=1)
    assert a.text_train == b.text_train
    for relation in RELATIONS:
        for question, answer in a.questions(relation):
            assert question.startswith("q: ") and answer.endswith(".")


def test_every_fact_appears_in_training_text():
    corpus = make_corpus(n_people=5, train_sentences=2000, val_sentences=10, seed=0)
    for person in corpus.people:
        assert person.city in corpus.text_train
