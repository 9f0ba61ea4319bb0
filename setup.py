from glob import glob

from setuptools import find_packages, setup

package_name = "uav_debate_eval"

setup(
    name=package_name,
    version="0.1.0",
    # config/ also goes inside the package (uav_debate_eval/config), so a plain `pip install .` finds its
    # default and demo configs without an ament share directory (live.config.find_config).
    packages=find_packages(exclude=["test", "test.*", "benchmarks"]) + [package_name + ".config"],
    package_dir={package_name + ".config": "config"},
    # msgs/: the px4_msgs (BSD-3, LICENSE beside them), tf2_msgs and mavros_msgs definitions: bags without embedded
    # ones decode with them, and tools/ros_msgs.py generates the rclpy packages from them
    package_data={package_name: ["report/*.json", "debate/*.yaml", "debate/*.npz", "msgs/*/LICENSE", "msgs/*/README.md",
                                 "msgs/px4_msgs/*/msg/*.msg", "msgs/px4_msgs/*/srv/*.srv", "msgs/tf2_msgs/msg/*.msg",
                                 "msgs/mavros_msgs/msg/*.msg"],
                  package_name + ".config": ["*.yaml", "*.json", "*.xml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml") + glob("config/*.json") + glob("config/*.xml")),
    ],
    install_requires=["setuptools", "numpy", "scipy", "PyYAML", "jsonschema", "rosbags", "pyulog", "pymavlink",
                      "openai", "matplotlib", "rich", "tokenizers", "foxglove-sdk", "mcap", "websockets", "pyarrow"],
    extras_require={"train": ["torch==2.13.0", "stable-baselines3==2.9.2", "gymnasium==1.4.0"],
                    # rtamt: the STL oracle of test/test_rules_rtamt.py and benchmarks/bench_rules.py (issue 26)
                    "test": ["pytest", "rtamt==0.4.10"]},
    zip_safe=True,
    maintainer="uav_debate_eval maintainers",
    maintainer_email="maintainers@uav-debate-eval.invalid",
    description="UAV swarm evaluation: deterministic safety veto, trajectory DSL and an LLM expert panel.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "uav-debate-eval = uav_debate_eval.cli:console",
            "safety_verifier = uav_debate_eval.nodes.safety_verifier:main",
            "dsl_builder = uav_debate_eval.nodes.dsl_builder:main",
            "debate_panel = uav_debate_eval.nodes.debate_panel:main",
            "swarm_sim = uav_debate_eval.nodes.swarm_sim:main",
        ],
    },
)
