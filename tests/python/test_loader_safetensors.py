"""The C++ safetensors reader and checkpoint against files written by the `safetensors` package.

Oracle: the `safetensors` package writes every file (or, for malformed cases, a valid package-written file
is edited byte by byte); the tensors are fresh random bytes per run, so "the reader returns the same bytes"
can only pass if offsets, shapes and dtypes are all read right.
"""

from __future__ import annotations

import json
import os
import struct

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save, save_file

# Every dtype the reader recognises, with the numpy type the package writes it from.
DTYPES = {
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn,
    "F8_E8M0": ml_dtypes.float8_e8m0fnu,
    "U8": np.uint8,
    "I8": np.int8,
    "BOOL": np.bool_,
    "U16": np.uint16,
    "I32": np.int32,
    "I64": np.int64,
    "F64": np.float64,
}


@pytest.fixture()
def rng():
    seed = int.from_bytes(os.urandom(8), "little")
    print(f"random seed {seed}")  # shown by pytest when the test fails
    return np.random.default_rng(seed)


def random_array(rng, dtype, shape) -> np.ndarray:
    """Random bit patterns of `dtype` (NaNs and all: the reader must not care what the bytes mean)."""
    itemsize = np.dtype(dtype).itemsize
    count = int(np.prod(shape, dtype=np.int64))
    if dtype is np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    raw = rng.integers(0, 256, size=count * itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def random_tensors(rng, count: int, prefix: str = "t") -> dict[str, np.ndarray]:
    names = list(DTYPES)
    tensors = {}
    for i in range(count):
        dtype_name = names[i % len(names)]
        rank = int(rng.integers(0, 4))
        shape = tuple(int(d) for d in rng.integers(1, 9, size=rank))
        tensors[f"{prefix}.{i}.{dtype_name.lower()}"] = random_array(rng, DTYPES[dtype_name], shape)
    tensors[f"{prefix}.empty"] = np.zeros((0, 5), dtype=np.float32)
    return tensors


def dtype_of(array: np.ndarray) -> str:
    return next(name for name, dtype in DTYPES.items() if np.dtype(dtype) == array.dtype)


def check_same(records: list[dict], tensors: dict[str, np.ndarray]) -> None:
    assert [r["name"] for r in records] == sorted(tensors)
    for record in records:
        array = tensors[record["name"]]
        assert record["dtype"] == dtype_of(array), record["name"]
        assert tuple(record["shape"]) == array.shape, record["name"]
        assert record["bytes"] == array.nbytes, record["name"]


# ----------------------------------------------------------------------------------------------------------
# valid files


def test_single_file_round_trip(fkt, tmp_path, rng):
    tensors = random_tensors(rng, 30)
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt", "note": "random"})

    result = fkt.safetensors_records(str(path))
    check_same(result["tensors"], tensors)
    assert result["metadata"] == {"format": "pt", "note": "random"}

    data = path.read_bytes()
    for record in result["tensors"]:
        assert data[record["begin"] : record["end"]] == tensors[record["name"]].tobytes(), record["name"]

    checkpoint = fkt.Checkpoint(str(path))
    for name, array in tensors.items():
        assert checkpoint.tensor_bytes(name) == array.tobytes(), name


def test_memory_parser_agrees_with_file_reader(fkt, tmp_path, rng):
    tensors = random_tensors(rng, 12)
    data = save(tensors)
    path = tmp_path / "x.safetensors"
    path.write_bytes(data)
    assert fkt.parse_safetensors_header(data, "mem") == fkt.safetensors_records(str(path))["tensors"]


def write_sharded(directory, rng, shards: int = 3) -> dict[str, tuple[str, np.ndarray]]:
    """Shards written by the package plus a Hugging Face style index; returns name -> (shard, array)."""
    where = {}
    for shard in range(shards):
        file_name = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        tensors = random_tensors(rng, 8, prefix=f"s{shard}")
        save_file(tensors, str(directory / file_name))
        where.update({name: (file_name, array) for name, array in tensors.items()})
    index = {"metadata": {"total_size": 0}, "weight_map": {name: shard for name, (shard, _) in where.items()}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    return where


def test_sharded_checkpoint_with_index(fkt, tmp_path, rng):
    where = write_sharded(tmp_path, rng)
    checkpoint = fkt.Checkpoint(str(tmp_path))
    rows = checkpoint.tensors()
    assert [r["name"] for r in rows] == sorted(where)
    for row in rows:
        shard, array = where[row["name"]]
        assert os.path.basename(row["file"]) == shard
        assert row["dtype"] == dtype_of(array) and tuple(row["shape"]) == array.shape
        assert checkpoint.tensor_bytes(row["name"]) == array.tobytes()


def test_directory_without_index_takes_every_safetensors_file(fkt, tmp_path, rng):
    where = write_sharded(tmp_path, rng, shards=2)
    (tmp_path / "model.safetensors.index.json").unlink()
    (tmp_path / "notes.txt").write_text("not a shard")
    checkpoint = fkt.Checkpoint(str(tmp_path))
    assert sorted(os.path.basename(f) for f in checkpoint.files()) == sorted({s for s, _ in where.values()})
    for name, (_, array) in where.items():
        assert checkpoint.tensor_bytes(name) == array.tobytes()


def test_model_safetensors_preferred_over_other_files(fkt, tmp_path, rng):
    tensors = random_tensors(rng, 4)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    save_file(tensors, str(tmp_path / "copy.safetensors"))  # would be a duplicate if it were read
    checkpoint = fkt.Checkpoint(str(tmp_path))
    assert [os.path.basename(f) for f in checkpoint.files()] == ["model.safetensors"]


def test_unknown_tensor_is_not_found(fkt, tmp_path, rng):
    save_file(random_tensors(rng, 2), str(tmp_path / "model.safetensors"))
    with pytest.raises(fkt.LoaderError, match=r"not_found: tensor 'nope' not found in checkpoint"):
        fkt.Checkpoint(str(tmp_path)).tensor_bytes("nope")


# ----------------------------------------------------------------------------------------------------------
# malformed files: each must give LoaderError naming the file and, where one is at fault, the tensor


def valid_file(rng) -> tuple[dict, bytes]:
    """A package-written file with tensors 'a' (F32 [2,3]) and 'b' (BF16 [4]); returns (header, data)."""
    data = save({"a": random_array(rng, np.float32, (2, 3)), "b": random_array(rng, ml_dtypes.bfloat16, (4,))})
    length = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def assemble(header, payload: bytes) -> bytes:
    text = header if isinstance(header, (bytes, str)) else json.dumps(header)
    text = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(text)) + text + payload


def expect_error(fkt, tmp_path, content: bytes, code: str, *fragments: str) -> str:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(fkt.LoaderError) as caught:
        fkt.safetensors_records(str(path))
    message = str(caught.value)
    assert message.startswith(code + ":"), message
    assert str(path) in message, message
    for fragment in fragments:
        assert fragment in message, message
    # The in-memory parser (the fuzz target) must refuse the same bytes the same way.
    with pytest.raises(fkt.LoaderError, match=code):
        fkt.parse_safetensors_header(content, "mem")
    return message


def edited(rng, **entry_changes) -> bytes:
    header, payload = valid_file(rng)
    for field, value in entry_changes.items():
        header["a"][field] = value
    return assemble(header, payload)


def test_empty_and_truncated_files(fkt, tmp_path):
    expect_error(fkt, tmp_path, b"", "invalid_checkpoint", "too short")
    expect_error(fkt, tmp_path, b"\x10\x00\x00", "invalid_checkpoint", "too short")


def test_header_length_past_end_of_file(fkt, tmp_path, rng):
    content = assemble(*valid_file(rng))
    expect_error(fkt, tmp_path, struct.pack("<Q", len(content)) + content[8:], "invalid_checkpoint",
                 "runs past the end of the file")
    expect_error(fkt, tmp_path, content[: len(content) // 3], "invalid_checkpoint")


def test_header_length_over_limit(fkt, tmp_path):
    expect_error(fkt, tmp_path, struct.pack("<Q", 1 << 40) + b"{}", "invalid_checkpoint", "exceeds the limit")


def test_bad_json(fkt, tmp_path, rng):
    _, payload = valid_file(rng)
    expect_error(fkt, tmp_path, assemble(b'{"a": {"dtype": "F32",', payload), "invalid_checkpoint",
                 "not valid JSON")
    expect_error(fkt, tmp_path, assemble(b"[1, 2]", payload), "invalid_checkpoint", "not a JSON object")
    expect_error(fkt, tmp_path, assemble(b'{"a": 5}', payload), "invalid_checkpoint", "'a'", "not a JSON object")
    expect_error(fkt, tmp_path, assemble(b'{"a": {"shape": [[[1]]]}}', payload), "invalid_checkpoint", "deeper")


def test_offsets_out_of_range(fkt, tmp_path, rng):
    header, payload = valid_file(rng)
    header["b"]["data_offsets"] = [len(payload) - 4, len(payload) + 4]
    expect_error(fkt, tmp_path, assemble(header, payload), "invalid_checkpoint", "'b'", "past the data region")
    header["b"]["data_offsets"] = [8, 0]
    expect_error(fkt, tmp_path, assemble(header, payload), "invalid_checkpoint", "'b'", "end before begin")
    header["b"]["data_offsets"] = [0]
    expect_error(fkt, tmp_path, assemble(header, payload), "invalid_checkpoint", "'b'", "data_offsets")
    header["b"]["data_offsets"] = [-8, 0]
    expect_error(fkt, tmp_path, assemble(header, payload), "invalid_checkpoint", "'b'", "data_offsets")


def test_overlapping_tensors(fkt, tmp_path, rng):
    header, payload = valid_file(rng)
    end_of_a = header["a"]["data_offsets"][1]
    header["c"] = {"dtype": "U8", "shape": [4], "data_offsets": [end_of_a - 4, end_of_a]}  # a's last 4 bytes
    expect_error(fkt, tmp_path, assemble(header, payload), "invalid_checkpoint", "overlaps", "'a'", "'c'")


def test_wrong_byte_count(fkt, tmp_path, rng):
    expect_error(fkt, tmp_path, edited(rng, shape=[2, 2]), "invalid_checkpoint", "'a'", "hold 24 bytes", "needs 16")
    expect_error(fkt, tmp_path, edited(rng, dtype="F16"), "invalid_checkpoint", "'a'", "needs 12")


def test_unknown_and_sub_byte_dtypes(fkt, tmp_path, rng):
    expect_error(fkt, tmp_path, edited(rng, dtype="F12"), "invalid_checkpoint", "'a'", "unknown dtype 'F12'")
    expect_error(fkt, tmp_path, edited(rng, dtype=7), "invalid_checkpoint", "'a'", "dtype")
    expect_error(fkt, tmp_path, edited(rng, dtype="F4"), "unsupported", "'a'", "sub-byte")


def test_shape_overflow_and_bad_dims(fkt, tmp_path, rng):
    expect_error(fkt, tmp_path, edited(rng, shape=[1 << 32, 1 << 32, 16]), "invalid_checkpoint", "'a'", "overflows")
    expect_error(fkt, tmp_path, edited(rng, shape=[1 << 61, 4]), "invalid_checkpoint", "'a'", "more than 2^64")
    expect_error(fkt, tmp_path, edited(rng, shape=[-1, 6]), "invalid_checkpoint", "'a'", "non-negative")
    expect_error(fkt, tmp_path, edited(rng, shape=[2.0, 3]), "invalid_checkpoint", "'a'", "non-negative")
    expect_error(fkt, tmp_path, edited(rng, shape=[1 << 63, 0]), "invalid_checkpoint", "'a'", "too large")
    expect_error(fkt, tmp_path, edited(rng, shape="2x3"), "invalid_checkpoint", "'a'", "shape")


def test_duplicate_names(fkt, tmp_path, rng):
    header, payload = valid_file(rng)
    entry = json.dumps(header["a"])
    text = '{"a": %s, "b": %s, "a": %s}' % (entry, json.dumps(header["b"]), entry)
    expect_error(fkt, tmp_path, assemble(text, payload), "invalid_checkpoint", "'a'", "appears twice")
    text = '{"a": {"dtype": "F32", "dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}'
    expect_error(fkt, tmp_path, assemble(text, payload), "invalid_checkpoint", "'dtype'", "appears twice")


def test_bad_metadata(fkt, tmp_path, rng):
    header, payload = valid_file(rng)
    header["__metadata__"] = {"format": 5}
    expect_error(fkt, tmp_path, assemble(header, payload), "invalid_checkpoint", "__metadata__")


def test_os_errors_name_the_file(fkt, tmp_path):
    with pytest.raises(fkt.LoaderError, match=r"^io: cannot open '.*missing\.safetensors': No such file"):
        fkt.safetensors_records(str(tmp_path / "missing.safetensors"))
    with pytest.raises(fkt.LoaderError, match=r"^io: cannot map '.*': not a regular file"):
        fkt.safetensors_records(str(tmp_path))


# ----------------------------------------------------------------------------------------------------------
# malformed checkpoints


def expect_checkpoint_error(fkt, path, code: str, *fragments: str) -> None:
    with pytest.raises(fkt.LoaderError) as caught:
        fkt.Checkpoint(str(path))
    message = str(caught.value)
    assert message.startswith(code + ":"), message
    for fragment in fragments:
        assert fragment in message, message


def rewrite_index(directory, edit) -> None:
    path = directory / "model.safetensors.index.json"
    index = json.loads(path.read_text())
    edit(index["weight_map"])
    path.write_text(json.dumps(index))


def test_index_pointing_outside_the_directory(fkt, tmp_path, rng):
    where = write_sharded(tmp_path, rng)
    name = sorted(where)[3]
    for outside in ("../" + where[name][0], "/etc/passwd", "sub/../../x.safetensors"):
        rewrite_index(tmp_path, lambda weight_map: weight_map.__setitem__(name, outside))
        expect_checkpoint_error(fkt, tmp_path, "invalid_checkpoint", f"'{name}'", "outside the checkpoint directory")


def test_index_naming_a_missing_shard(fkt, tmp_path, rng):
    where = write_sharded(tmp_path, rng)
    name = sorted(where)[0]
    rewrite_index(tmp_path, lambda weight_map: weight_map.__setitem__(name, "gone.safetensors"))
    expect_checkpoint_error(fkt, tmp_path, "not_found", f"'{name}'", "gone.safetensors", "does not exist")


def test_tensor_missing_from_its_shard(fkt, tmp_path, rng):
    where = write_sharded(tmp_path, rng)
    rewrite_index(tmp_path, lambda weight_map: weight_map.__setitem__("ghost.weight", where[sorted(where)[0]][0]))
    expect_checkpoint_error(fkt, tmp_path, "invalid_checkpoint", "'ghost.weight'", where[sorted(where)[0]][0],
                            "does not contain it")


def test_index_naming_the_wrong_shard(fkt, tmp_path, rng):
    where = write_sharded(tmp_path, rng)
    name = next(n for n in sorted(where) if where[n][0] != where[sorted(where)[-1]][0])
    other = where[sorted(where)[-1]][0]
    rewrite_index(tmp_path, lambda weight_map: weight_map.__setitem__(name, other))
    expect_checkpoint_error(fkt, tmp_path, "invalid_checkpoint", f"'{name}'", other)


def test_tensor_in_two_shards(fkt, tmp_path, rng):
    save_file({"x": random_array(rng, np.float32, (3,))}, str(tmp_path / "one.safetensors"))
    save_file({"x": random_array(rng, np.float32, (3,))}, str(tmp_path / "two.safetensors"))
    expect_checkpoint_error(fkt, tmp_path, "invalid_checkpoint", "'x'", "one.safetensors", "two.safetensors")


def test_bad_index_files(fkt, tmp_path, rng):
    write_sharded(tmp_path, rng)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text("{ not json")
    expect_checkpoint_error(fkt, tmp_path, "invalid_checkpoint", str(index), "not valid JSON")
    index.write_text(json.dumps({"metadata": {}}))
    expect_checkpoint_error(fkt, tmp_path, "invalid_checkpoint", str(index), "weight_map")
    index.write_text(json.dumps({"weight_map": {"a": 3}}))
    expect_checkpoint_error(fkt, tmp_path, "invalid_checkpoint", str(index), "'a'")


def test_missing_and_empty_checkpoints(fkt, tmp_path):
    expect_checkpoint_error(fkt, tmp_path / "nowhere", "not_found", "nowhere", "does not exist")
    expect_checkpoint_error(fkt, tmp_path, "not_found", str(tmp_path), "no model.safetensors.index.json")


def test_malformed_shard_names_its_file(fkt, tmp_path, rng):
    where = write_sharded(tmp_path, rng)
    shard = where[sorted(where)[0]][0]
    content = (tmp_path / shard).read_bytes()
    (tmp_path / shard).write_bytes(content[:-1])  # last tensor now runs past the end
    expect_checkpoint_error(fkt, tmp_path, "invalid_checkpoint", shard, "past the data region")
