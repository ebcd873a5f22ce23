"""The newer on-disk formats as declared records (`decoders.records.stored`): the files written
before they were records (the shipped head's config.json and training.json, the shipped corpus's
meta.json and index.jsonl, a GGUF cache marker with and without checksums) open and read the same
values; a damaged or foreign file is one line naming the file, the field and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from decoders.core.errors import DecodeError
from decoders.records.stored import UNSET, CorpusMeta, CorpusRow, GGUFMarker, HeadConfigFile, TrainingReport

ROOT = Path(__file__).resolve().parents[2]
HEAD = ROOT / "decoders" / "models" / "heads" / "smollm2-135m-instruct"
CORPUS = ROOT / "corpus" / "smollm2-135m-instruct"


def plain(record) -> object:
    return json.loads(msgspec.json.encode(record))


def test_the_shipped_heads_files_open_with_every_value_as_written():
    config = HeadConfigFile.read(HEAD / "config.json")
    written = json.loads((HEAD / "config.json").read_text())
    assert config.tui_decode_format == "eagle3" and config.hidden_size == written["hidden_size"] == 576
    assert config.eagle_config is not UNSET and config.eagle_config.eagle_aux_hidden_state_layer_ids == [2, 15, 27]
    assert config.tui_decode_weights_id is UNSET  # written before the weights carried an id: loads unchecked
    assert plain(config) == written  # nothing it holds is lost or changed by reading it as a record
    report = TrainingReport.read(HEAD / "training.json")
    assert plain(report) == json.loads((HEAD / "training.json").read_text())
    assert report.learning_curve[-1].step == "end" and report.train_seconds == 2655.6
    assert report.settings is not UNSET and (report.settings.ttt, report.settings.epochs) == (3, 3.0)
    assert len(report.accept_per_depth) == report.settings.ttt and report.settings.curve_points == 12


def test_a_training_reports_settings_are_typed_and_a_wrong_one_is_one_line(tmp_path):
    """train-head's settings read as `TrainSettings` (a rename fails the type check, not silently
    None); a report with none opens with them UNSET and is written back without them."""
    written = json.loads((HEAD / "training.json").read_text())
    del written["settings"]
    bare = TrainingReport.loads(json.dumps(written))
    assert bare.settings is UNSET and plain(bare) == written
    written["settings"] = {"corpus": "c", "out": "o", "ttt": "3"}
    path = tmp_path / "training.json"
    path.write_text(json.dumps(written))
    with pytest.raises(DecodeError) as err:
        TrainingReport.read(path)
    assert f"The training report {path}: settings.ttt must be an integer, got str" in str(err.value)


def test_the_shipped_corpus_files_open_with_every_value_as_written():
    meta = CorpusMeta.read(CORPUS / "meta.json")
    assert (meta.model, meta.vocab_size, meta.token_bytes) == ("bundled", 49152, 2)
    lines = (CORPUS / "index.jsonl").read_text().splitlines(keepends=True)[:50]
    rows = [CorpusRow.loads(line) for line in lines]
    assert [row.line() for row in rows] == lines  # written back byte for byte
    assert rows[1].key == "p1" and rows[1].start == rows[0].start + rows[0].prompt + rows[0].answer


def test_a_gguf_marker_of_every_age_opens():
    old = GGUFMarker.loads(json.dumps({"source": "/m.gguf", "size": 3, "mtime_ns": 4, "converted_at": "x",
                                       "conversion_seconds": 1.5}))
    assert old.files is None  # an older version's: no checksums, so the copy is converted afresh
    files = {"model.safetensors": {"size": 10, "mtime_ns": 11, "sha256": "ab", "sample": "cd"},
             "config.json": {"size": 2, "mtime_ns": 3, "sha256": "ef"}}
    new = GGUFMarker.loads(json.dumps({"source": "/m.gguf", "size": 3, "mtime_ns": 4, "converted_at": "x",
                                       "conversion_seconds": 1.5, "files": files}))
    assert new.files is not None and new.files["config.json"].sample is UNSET
    assert plain(new)["files"] == files


@pytest.mark.parametrize("record,text,message", [
    (HeadConfigFile, "[1, 2]", "The head's config {path} is not a JSON object; download the head again"),
    (HeadConfigFile, '{"hidden_size": "576"}', "The head's config {path}: hidden_size must be an integer, got str;"),
    (HeadConfigFile, '{"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, true]}}',
     "eagle_config.eagle_aux_hidden_state_layer_ids[1] must be an integer, got bool"),
    (HeadConfigFile, '{"tui_decode_format": "eagle9"}', "tui_decode_format has an invalid value 'eagle9'"),
    (HeadConfigFile, "\x00\xff not json", "The head's config {path} cannot be read (it is not JSON"),
    (TrainingReport, '{"corpus": "c"}', "The training report {path} has no corpus_samples; train the head again"),
    (TrainingReport, "", "The training report {path} cannot be read (it is not JSON"),
    (CorpusMeta, '"bundled"', "The corpus's metadata {path} is not a JSON object; fix or delete it."),
    (CorpusMeta, '{"vocab_size": 1.5}', "The corpus's metadata {path}: vocab_size must be an integer or null"),
    (GGUFMarker, '{"files": {"a": {"size": 1}}}', "The cache marker {path}: files.a has no mtime_ns"),
])
def test_a_damaged_or_foreign_file_is_one_line_naming_the_file_and_the_field(tmp_path, record, text, message):
    path = tmp_path / "file.json"
    path.write_text(text, encoding="latin-1")
    with pytest.raises(DecodeError) as err:
        record.read(path)
    said = str(err.value)
    assert message.format(path=path) in said and said.startswith(f"The {record.WHAT[4:]} {path}"), said
    assert "\n" not in said and "Traceback" not in said


def test_a_corpus_index_line_of_the_wrong_shape_names_its_line_and_field(tmp_path):
    from decoders.training.corpus import Corpus

    corpus = Corpus(tmp_path, model="m", vocab_size=64, append=True)
    corpus.append("p0", [1, 2], [3])
    corpus.close()
    with open(tmp_path / "index.jsonl", "a") as f:
        f.write('{"key": "p1", "start": 3, "prompt": -1, "answer": 2}\n')
    with pytest.raises(DecodeError, match=r"index.jsonl line 2 is not a sample \(prompt must be an integer >= 0\); "
                                          "delete that line"):
        Corpus(tmp_path)
    (tmp_path / "index.jsonl").write_text('{"key": "p0", "start": 0, "prompt": 2, "answer": 1}\n[]\n')
    with pytest.raises(DecodeError, match=r"line 2 is not a sample \(is not a JSON object\)"):
        Corpus(tmp_path)


def test_a_file_larger_than_any_such_file_is_refused_unread(tmp_path):
    path = tmp_path / "config.json"
    with open(path, "wb") as f:
        f.truncate((16 << 20) + 10)
    with pytest.raises(DecodeError, match="is larger than 16 MiB, which no such file is"):
        HeadConfigFile.read(path)
