# need_torch: skip the test unless python3 can import torch and safetensors (the PyTorch peers'
# needs). find_spec, not import: importing torch takes seconds, and the tests import it anyway.
need_torch() {
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None or u.find_spec('safetensors') is None)" 2>/dev/null ||
        skip "torch or safetensors is not importable"
}
