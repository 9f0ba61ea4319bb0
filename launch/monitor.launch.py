"""All monitoring nodes, each in its own process, grouped under one namespace.

Topics are absolute (/swarm/..., /<uav>/pose, CONTRACT.md §5), so the namespace only groups the node
names; parameters come from config/monitor.yaml (keys /**/<node> match any namespace).
"""

from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
from launch.substitutions import EnvironmentVariable, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    namespace = LaunchConfiguration("namespace")
    params_file = LaunchConfiguration("params_file")
    llm_backend = LaunchConfiguration("llm_backend")
    common = {"use_sim_time": LaunchConfiguration("use_sim_time"), "mission_file": LaunchConfiguration("mission_file")}
    show_profile = PathJoinSubstitution([FindPackageShare("uav_debate_eval"), "config", "fastdds_show.xml"])
    return LaunchDescription([
        # Fast DDS's shared-memory queue sized for a show's bursts (config/fastdds_show.xml), unless one is set
        SetEnvironmentVariable("FASTRTPS_DEFAULT_PROFILES_FILE",
                               EnvironmentVariable("FASTRTPS_DEFAULT_PROFILES_FILE", default_value=show_profile)),
        DeclareLaunchArgument("namespace", default_value="uav_monitor", description="namespace of the monitor nodes"),
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution([FindPackageShare("uav_debate_eval"), "config", "monitor.yaml"]),
            description="ROS 2 parameter file for safety_verifier, dsl_builder and debate_panel"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="follow /clock (ros2 bag play --clock, Gazebo)"),
        DeclareLaunchArgument(
            "mission_file",
            default_value=PathJoinSubstitution([FindPackageShare("uav_debate_eval"), "config", "default_mission.yaml"]),
            description="mission YAML with the hard constraints (CONTRACT.md §2)"),
        DeclareLaunchArgument("llm_backend", default_value="rules", description="panel backend: rules, local, openai"),
        Node(package="uav_debate_eval", executable="safety_verifier", name="safety_verifier", namespace=namespace,
             parameters=[params_file, common], output="screen", respawn=True),
        Node(package="uav_debate_eval", executable="dsl_builder", name="dsl_builder", namespace=namespace,
             parameters=[params_file, common], output="screen", respawn=True),
        Node(package="uav_debate_eval", executable="debate_panel", name="debate_panel", namespace=namespace,
             parameters=[params_file, {**common, "llm_backend": llm_backend}],
             output="screen", respawn=True),
    ])
