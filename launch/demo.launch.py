"""The simulated formation flight with a near miss (swarm_sim) plus the monitor, each node in its own process.

swarm_sim plays in real time with wall-clock stamps (like a real flight); the monitors judge it against
config/demo_mission.yaml, the scenario's own mission.
"""

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("uav_debate_eval")
    params_file = LaunchConfiguration("params_file")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=PathJoinSubstitution([share, "config", "demo.yaml"]),
                              description="parameters of swarm_sim and the monitor nodes"),
        DeclareLaunchArgument("llm_backend", default_value="local", description="panel backend: rules, local, openai"),
        Node(package="uav_debate_eval", executable="swarm_sim", name="swarm_sim",
             parameters=[params_file], output="screen"),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "monitor.launch.py"])),
            launch_arguments={"params_file": params_file, "use_sim_time": "false",
                              "mission_file": PathJoinSubstitution([share, "config", "demo_mission.yaml"]),
                              "llm_backend": LaunchConfiguration("llm_backend")}.items()),
    ])
