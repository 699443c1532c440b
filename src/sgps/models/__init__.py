"""PyTorch models: ResNet trunks, the flat networks, the VQ-VAE and π^SG, losses, evaluators, checkpoints."""

from sgps.models.checkpoint import load_checkpoint, save_checkpoint
from sgps.models.evaluator import NetworkEvaluator, SubgoalEvaluator
from sgps.models.flat import FlatNetwork, FlatNetworkConfig
from sgps.models.losses import heuristic_loss, levin_loss, policy_heuristic_loss
from sgps.models.resnet import ReducedHead, ResidualBlock, ResNetTrunk
from sgps.models.subgoal import SubgoalModel, SubgoalModelConfig, mix
from sgps.models.vqvae import VQVAE, EMACodebook

__all__ = [
    "VQVAE",
    "EMACodebook",
    "FlatNetwork",
    "FlatNetworkConfig",
    "NetworkEvaluator",
    "ReducedHead",
    "ResNetTrunk",
    "ResidualBlock",
    "SubgoalEvaluator",
    "SubgoalModel",
    "SubgoalModelConfig",
    "heuristic_loss",
    "levin_loss",
    "load_checkpoint",
    "mix",
    "policy_heuristic_loss",
    "save_checkpoint",
]
