"""PyTorch models: ResNet trunks, the flat policy / heuristic networks, losses, evaluators, checkpoints."""

from sgps.models.checkpoint import load_checkpoint, save_checkpoint
from sgps.models.evaluator import NetworkEvaluator
from sgps.models.flat import FlatNetwork, FlatNetworkConfig
from sgps.models.losses import heuristic_loss, levin_loss, policy_heuristic_loss
from sgps.models.resnet import ReducedHead, ResidualBlock, ResNetTrunk

__all__ = [
    "FlatNetwork",
    "FlatNetworkConfig",
    "NetworkEvaluator",
    "ReducedHead",
    "ResNetTrunk",
    "ResidualBlock",
    "heuristic_loss",
    "levin_loss",
    "load_checkpoint",
    "policy_heuristic_loss",
    "save_checkpoint",
]
