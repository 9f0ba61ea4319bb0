"""Monitor a Gazebo (gz sim) swarm: ros_gz_bridge turns /world/<world>/pose/info into a PoseArray.

The bridge config (config/gz_bridge.yaml) also bridges /clock, so the monitor runs with use_sim_time.
Pose array entries are named by pose_array_names in config/gazebo.yaml (the model order in the world).
"""

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("uav_debate_eval")
    return LaunchDescription([
        DeclareLaunchArgument("bridge_config", default_value=PathJoinSubstitution([share, "config", "gz_bridge.yaml"]),
                              description="ros_gz_bridge config (its world name must match the running world)"),
        DeclareLaunchArgument("params_file", default_value=PathJoinSubstitution([share, "config", "gazebo.yaml"]),
                              description="monitor parameters (pose_array input from the bridge)"),
        DeclareLaunchArgument("llm_backend", default_value="rules", description="panel backend: rules, local, openai"),
        Node(package="ros_gz_bridge", executable="parameter_bridge", name="gz_pose_bridge",
             parameters=[{"config_file": LaunchConfiguration("bridge_config")}], output="screen"),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "monitor.launch.py"])),
            launch_arguments={"params_file": LaunchConfiguration("params_file"), "use_sim_time": "true",
                              "llm_backend": LaunchConfiguration("llm_backend")}.items()),
    ])
