"""Point-cloud perception: observation in, features out (numpy in, numpy out; no simulator imports).

- :mod:`~handleit.perception.point_cloud`: checks, frames, crops, ground removal, voxel downsampling,
  normals, plane fits, a cabinet front's outward normal.
- :mod:`~handleit.perception.handle_points`: handle points merged over steps, the handle's frame and shape.
- :mod:`~handleit.perception.handle_grasps`: horizontal and vertical grasps on a handle ("Let's Handle It",
  arXiv 2202.11792, Sec. 2.3).
- :mod:`~handleit.perception.open_state`: how far the target drawer/door is open.
- :mod:`~handleit.perception.grasp_predictors`: grasp predictors by name (plug-ins, entry points).
- :mod:`~handleit.perception.antipodal_grasps`: 6-DoF parallel-jaw grasps on an object's partial cloud.
- :mod:`~handleit.perception.grasp_scorer`: a learned grasp scorer (torch; imported on its own, not here).
- :mod:`~handleit.perception.robot_self_filter`: the cloud's robot points from the URDF at the measured joints
  (Drake; imported on its own, not here).
- :mod:`~handleit.perception.bucket_rim`: a bucket's rim (height, circle, thickness, axis), the ball inside.
- :mod:`~handleit.perception.chair_center`: a swivel chair's centre (Let's Handle It Fig. 10), upper body, backrest.
"""

from handleit.perception.antipodal_grasps import evaluate_grasp_poses, sample_antipodal_grasps
from handleit.perception.bucket_rim import (
    RIM_THICKNESS_THRESHOLD_M,
    BucketRim,
    ball_points_mask,
    classify_rim_thickness,
    estimate_bucket_rim,
    fit_circle_xy,
    points_inside_bucket,
    rim_is_pinchable,
)
from handleit.perception.chair_center import (
    Backrest,
    ChairCenter,
    estimate_backrest,
    estimate_chair_center,
    mean_center,
    upper_body_mask,
)
from handleit.perception.grasp_predictors import (
    GraspPredictor,
    available_grasp_predictors,
    get_grasp_predictor,
    register_grasp_predictor,
)
from handleit.perception.handle_grasps import flipped_grasp_pose, pregrasp_pose, sample_handle_grasps
from handleit.perception.handle_points import (
    HandleAccumulator,
    HandleFrame,
    classify_handle_shape,
    estimate_handle_frame,
)
from handleit.perception.open_state import OpenState, OpenStateEstimator
from handleit.perception.point_cloud import (
    crop_box,
    estimate_front_normal,
    estimate_normals,
    fit_ground_plane,
    fit_plane,
    fit_vertical_plane,
    remove_ground,
    select,
    transform_points,
    voxel_downsample,
)

__all__ = [
    "RIM_THICKNESS_THRESHOLD_M",
    "Backrest",
    "BucketRim",
    "ChairCenter",
    "GraspPredictor",
    "HandleAccumulator",
    "HandleFrame",
    "OpenState",
    "OpenStateEstimator",
    "available_grasp_predictors",
    "ball_points_mask",
    "classify_handle_shape",
    "classify_rim_thickness",
    "crop_box",
    "estimate_backrest",
    "estimate_bucket_rim",
    "estimate_chair_center",
    "estimate_front_normal",
    "estimate_handle_frame",
    "estimate_normals",
    "evaluate_grasp_poses",
    "fit_circle_xy",
    "fit_ground_plane",
    "fit_plane",
    "fit_vertical_plane",
    "flipped_grasp_pose",
    "get_grasp_predictor",
    "mean_center",
    "points_inside_bucket",
    "pregrasp_pose",
    "register_grasp_predictor",
    "remove_ground",
    "rim_is_pinchable",
    "sample_antipodal_grasps",
    "sample_handle_grasps",
    "select",
    "transform_points",
    "upper_body_mask",
    "voxel_downsample",
]
