import subprocess


def test_cli_without_arguments_prints_usage_and_fails(cli):
    result = subprocess.run([str(cli)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "usage: flashkv" in result.stdout
