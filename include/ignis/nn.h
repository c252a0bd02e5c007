// ignis::nn: modules, layers, losses, initialisers and the functional forms.
#pragma once

#include "ignis/nn/activation.h"
#include "ignis/nn/conv.h"
#include "ignis/nn/functional.h"
#include "ignis/nn/functional_ops.h"
#include "ignis/nn/graph.h"
#include "ignis/nn/impl_names.h"
#include "ignis/nn/init.h"
#include "ignis/nn/layers.h"
#include "ignis/nn/layers_extra.h"
#include "ignis/nn/loss.h"
#include "ignis/nn/loss_extra.h"
#include "ignis/nn/module.h"
#include "ignis/nn/norm.h"
