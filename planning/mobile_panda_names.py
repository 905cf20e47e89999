"""Joint and link names of the ManiSkill1 mobile Panda that the planners default to (plain strings: the
planners take every name as an argument; these only spare callers from repeating them)."""

# Base joints in the order x, y, yaw, torso height: x/y translate along the world axes, yaw turns about
# world z at the base origin (the URDF's root is welded to the world).
BASE_JOINT_NAMES = ("root_x_axis_joint", "root_y_axis_joint", "root_z_rotation_joint", "linear_actuator_height")
ROOT_LINK_NAME = "root"
BASE_LINK_NAME = "mobile_base"  # at ground level, x forward
TORSO_LINK_NAME = "adjustable_body"  # moved up and down by linear_actuator_height
