"""Inverse kinematics (Drake), motion planning (mplib) and trajectories (numpy in, numpy out). Arrives with issue 3."""
