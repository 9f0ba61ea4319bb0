"""A PX4 SITL swarm in Gazebo, monitored over ROS 2: the uXRCE-DDS agent, N PX4 instances spawned `spacing_m` apart
(PX4_GZ_MODEL_POSE) and the monitoring nodes reading every instance's [/px4_N]/fmu/out/vehicle_local_position
(config/px4.yaml). Needs a built PX4-Autopilot (`make px4_sitl`), Gazebo (gz sim) and MicroXRCEAgent on PATH, and
px4_msgs for rclpy from the same PX4 release (`make setup`, README "PX4 + Gazebo over ROS 2").

    ros2 launch uav_debate_eval px4_gz_swarm.launch.py px4_dir:=$HOME/PX4-Autopilot n:=3
"""

import os

from launch.actions import DeclareLaunchArgument, ExecuteProcess, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def _px4_instances(context):
    """Instance 0 starts Gazebo; the others join it (PX4_GZ_STANDALONE); instance k stands k * spacing_m north."""
    n = int(LaunchConfiguration("n").perform(context))
    spacing = float(LaunchConfiguration("spacing_m").perform(context))
    px4_dir = os.path.expanduser(LaunchConfiguration("px4_dir").perform(context))
    binary = os.path.join(px4_dir, "build", "px4_sitl_default", "bin", "px4")
    out = []
    for k in range(n):
        env = {"PX4_SYS_AUTOSTART": LaunchConfiguration("autostart").perform(context),
               "PX4_SIM_MODEL": LaunchConfiguration("model").perform(context),
               "PX4_GZ_MODEL_POSE": f"0,{k * spacing:g}",
               "PX4_GZ_WORLD": LaunchConfiguration("world").perform(context)}
        if k > 0:
            env["PX4_GZ_STANDALONE"] = "1"
        out.append(ExecuteProcess(cmd=[binary, "-i", str(k)], additional_env=env, cwd=px4_dir,
                                  name=f"px4_{k}", output="screen"))
    return out


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("uav_debate_eval")
    return LaunchDescription([
        DeclareLaunchArgument("n", default_value="3", description="number of PX4 instances"),
        DeclareLaunchArgument("spacing_m", default_value="6.0", description="spawn spacing (north), m"),
        DeclareLaunchArgument("px4_dir", default_value="~/PX4-Autopilot", description="built PX4-Autopilot checkout"),
        DeclareLaunchArgument("model", default_value="gz_x500", description="PX4_SIM_MODEL"),
        DeclareLaunchArgument("autostart", default_value="4001", description="PX4_SYS_AUTOSTART (4001: x500)"),
        DeclareLaunchArgument("world", default_value="default", description="Gazebo world"),
        DeclareLaunchArgument("agent_port", default_value="8888", description="uXRCE-DDS agent UDP port"),
        DeclareLaunchArgument("mission_file",
                              default_value=PathJoinSubstitution([share, "config", "default_mission.yaml"]),
                              description="mission YAML (hard constraints; frames: when there is no GPS)"),
        DeclareLaunchArgument("llm_backend", default_value="rules", description="panel backend: rules, local, openai"),
        ExecuteProcess(cmd=["MicroXRCEAgent", "udp4", "-p", LaunchConfiguration("agent_port")],
                       name="uxrce_dds_agent", output="screen"),
        OpaqueFunction(function=_px4_instances),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "monitor.launch.py"])),
            launch_arguments={"params_file": PathJoinSubstitution([share, "config", "px4.yaml"]),
                              "mission_file": LaunchConfiguration("mission_file"),
                              "llm_backend": LaunchConfiguration("llm_backend")}.items()),
    ])
