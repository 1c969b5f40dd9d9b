import pytest

import chipdock


def test_cpu_backend_is_discovered_and_accepted():
    infos = {b.name: b for b in chipdock.backends()}
    cpu = infos["cpu"]
    assert cpu.status == "accepted", cpu.reason
    assert cpu.abi_version == "{}.{}".format(*chipdock.ABI_VERSION)
    assert cpu.device_type == "cpu"
    assert cpu.source.startswith("entry point cpu")
    assert cpu.kernel_count >= 10  # the copy kernel for every dtype


def test_devices_and_lookup():
    devs = [str(d) for d in chipdock.devices()]
    assert devs[:2] == ["cpu:0", "cpu:1"]  # CHIPDOCK_CPU_DEVICES=2 from conftest
    d = chipdock.device("cpu:1")
    assert d.type == "cpu" and d.index == 1 and d.backend == "cpu"
    assert chipdock.device("cpu") == chipdock.device("cpu:0")
    assert chipdock.device(d) is d
    assert chipdock.get_default_device() == chipdock.device("cpu:0")


def test_properties():
    props = chipdock.device("cpu:0").properties()
    assert props["name"] and props["vendor"] == "chipdock"
    assert props["total_memory"] > 0
    assert props["compute_units"] >= 1
    for dt in chipdock.ALL_DTYPES:
        assert props["supported_dtypes_mask"] & (1 << dt.code)
    assert props["host_addressable"] is False  # strict mode (conftest)
    free, total = chipdock.device("cpu:0").memory_info()
    assert 0 < free <= total == props["total_memory"]


def test_invalid_ordinal_names_the_call_and_reason():
    with pytest.raises(chipdock.InvalidArgumentError) as exc:
        chipdock.device("cpu:7")
    assert exc.value.backend == "cpu"
    assert exc.value.call == "device"
    assert "invalid device ordinal 7" in str(exc.value) and "2 device(s)" in str(exc.value)


@pytest.mark.parametrize("spec", ["gpu:0", "cpu:x", ":1", ""])
def test_bad_device_specs(spec):
    with pytest.raises(chipdock.InvalidArgumentError) as exc:
        chipdock.device(spec)
    assert "device" in str(exc.value)


def test_non_string_device_is_rejected():
    with pytest.raises(chipdock.InvalidArgumentError, match="expected a Device"):
        chipdock.tensor([1.0], device=3.5)


def test_synchronize_and_default_device_setting():
    chipdock.synchronize("cpu:1")
    chipdock.set_default_device("cpu:1")
    try:
        assert str(chipdock.tensor([1, 2]).device) == "cpu:1"
    finally:
        chipdock.set_default_device(None)
    assert str(chipdock.tensor([1, 2]).device) == "cpu:0"


def test_kit_locations_exist():
    from pathlib import Path

    assert (Path(chipdock.cmake_dir()) / "chipdockConfig.cmake").is_file()
    assert (Path(chipdock.include_dir()) / "chipdock" / "device_api.h").is_file()


def test_opset_docs_ship_in_the_wheel(repo):
    """The opset's semantics (device_api/opset/README.md) and its spec travel with the core, next to the kit."""
    from pathlib import Path

    docs = Path(chipdock.opset_docs())
    assert docs.name == "README.md" and docs.parent.name == "opset"
    assert docs.read_text(encoding="utf-8") == (repo / "device_api" / "opset" / "README.md").read_text(encoding="utf-8")
    assert (docs.parent / "opset.yaml").read_bytes() == (repo / "device_api" / "opset" / "opset.yaml").read_bytes()
