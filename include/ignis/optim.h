// ignis::optim: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) and learning-rate schedulers,
// following PyTorch's torch.optim formulas.
#pragma once

#include "ignis/optim/adagrad.h"
#include "ignis/optim/adam.h"
#include "ignis/optim/optimizer.h"
#include "ignis/optim/rmsprop.h"
#include "ignis/optim/schedulers.h"
#include "ignis/optim/sgd.h"
