// LibTorch's implementation-class names for ignis's modules. In LibTorch, `torch::nn::Linear` is
// a ModuleHolder (a shared pointer) around the module class `torch::nn::LinearImpl`; in ignis the
// module class is `nn::Linear` itself, held by `std::shared_ptr` like any other object. These
// aliases let LibTorch code that names the module classes —
// `std::make_shared<torch::nn::LinearImpl>(4, 3)`, `std::shared_ptr<torch::nn::Conv2dImpl>` —
// compile with only the namespace changed, meaning the same.
#pragma once

#include "ignis/nn/activation.h"
#include "ignis/nn/conv.h"
#include "ignis/nn/layers.h"
#include "ignis/nn/layers_extra.h"
#include "ignis/nn/loss.h"
#include "ignis/nn/loss_extra.h"
#include "ignis/nn/norm.h"

namespace ignis::nn {

using AdaptiveAvgPool2dImpl = AdaptiveAvgPool2d;
using AdaptiveMaxPool2dImpl = AdaptiveMaxPool2d;
using AvgPool1dImpl = AvgPool1d;
using AvgPool2dImpl = AvgPool2d;
using AvgPool3dImpl = AvgPool3d;
using BCELossImpl = BCELoss;
using BCEWithLogitsLossImpl = BCEWithLogitsLoss;
using BatchNorm1dImpl = BatchNorm1d;
using BatchNorm2dImpl = BatchNorm2d;
using CELUImpl = CELU;
using CTCLossImpl = CTCLoss;
using Conv1dImpl = Conv1d;
using Conv2dImpl = Conv2d;
using Conv3dImpl = Conv3d;
using ConvTranspose1dImpl = ConvTranspose1d;
using ConvTranspose2dImpl = ConvTranspose2d;
using CosineEmbeddingLossImpl = CosineEmbeddingLoss;
using CosineSimilarityImpl = CosineSimilarity;
using CrossEntropyLossImpl = CrossEntropyLoss;
using DropoutImpl = Dropout;
using Dropout2dImpl = Dropout2d;
using ELUImpl = ELU;
using EmbeddingImpl = Embedding;
using FlattenImpl = Flatten;
using FoldImpl = Fold;
using GELUImpl = GELU;
using GLUImpl = GLU;
using GaussianNLLLossImpl = GaussianNLLLoss;
using GroupNormImpl = GroupNorm;
using HardsigmoidImpl = Hardsigmoid;
using HardswishImpl = Hardswish;
using HardtanhImpl = Hardtanh;
using HingeEmbeddingLossImpl = HingeEmbeddingLoss;
using HuberLossImpl = HuberLoss;
using IdentityImpl = Identity;
using InstanceNorm1dImpl = InstanceNorm1d;
using InstanceNorm2dImpl = InstanceNorm2d;
using InstanceNorm3dImpl = InstanceNorm3d;
using KLDivLossImpl = KLDivLoss;
using L1LossImpl = L1Loss;
using LayerNormImpl = LayerNorm;
using LeakyReLUImpl = LeakyReLU;
using LinearImpl = Linear;
using LocalResponseNormImpl = LocalResponseNorm;
using LogSigmoidImpl = LogSigmoid;
using LogSoftmaxImpl = LogSoftmax;
using MSELossImpl = MSELoss;
using MarginRankingLossImpl = MarginRankingLoss;
using MaxPool1dImpl = MaxPool1d;
using MaxPool2dImpl = MaxPool2d;
using MaxPool3dImpl = MaxPool3d;
using MishImpl = Mish;
using ModuleDictImpl = ModuleDict;
using ModuleListImpl = ModuleList;
using MultiLabelMarginLossImpl = MultiLabelMarginLoss;
using MultiLabelSoftMarginLossImpl = MultiLabelSoftMarginLoss;
using MultiMarginLossImpl = MultiMarginLoss;
using NLLLossImpl = NLLLoss;
using PReLUImpl = PReLU;
using PairwiseDistanceImpl = PairwiseDistance;
using PixelShuffleImpl = PixelShuffle;
using PixelUnshuffleImpl = PixelUnshuffle;
using PoissonNLLLossImpl = PoissonNLLLoss;
using ReLUImpl = ReLU;
using ReLU6Impl = ReLU6;
using SELUImpl = SELU;
using SiLUImpl = SiLU;
using SequentialImpl = Sequential;
using SigmoidImpl = Sigmoid;
using SmoothL1LossImpl = SmoothL1Loss;
using SoftMarginLossImpl = SoftMarginLoss;
using SoftmaxImpl = Softmax;
using SoftminImpl = Softmin;
using TanhImpl = Tanh;
using TripletMarginLossImpl = TripletMarginLoss;
using UnflattenImpl = Unflatten;
using UnfoldImpl = Unfold;
using UpsampleImpl = Upsample;

}  // namespace ignis::nn
