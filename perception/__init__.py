"""Point-cloud perception: observation in, features out (numpy in, numpy out; no simulator imports).

- :mod:`~handleit.perception.point_cloud`: checks, frames, crops, ground removal, voxel downsampling,
  normals, plane fits, a cabinet front's outward normal.
- :mod:`~handleit.perception.handle_points`: handle points merged over steps, the handle's frame and shape.
- :mod:`~handleit.perception.handle_grasps`: horizontal and vertical grasps on a handle (papers/002 Sec. 2.3).
- :mod:`~handleit.perception.open_state`: how far the target drawer/door is open.
- :mod:`~handleit.perception.grasp_predictors`: grasp predictors by name (plug-ins, entry points).
"""

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
    "GraspPredictor",
    "HandleAccumulator",
    "HandleFrame",
    "OpenState",
    "OpenStateEstimator",
    "available_grasp_predictors",
    "classify_handle_shape",
    "crop_box",
    "estimate_front_normal",
    "estimate_handle_frame",
    "estimate_normals",
    "fit_ground_plane",
    "fit_plane",
    "fit_vertical_plane",
    "flipped_grasp_pose",
    "get_grasp_predictor",
    "pregrasp_pose",
    "register_grasp_predictor",
    "remove_ground",
    "sample_handle_grasps",
    "select",
    "transform_points",
    "voxel_downsample",
]
